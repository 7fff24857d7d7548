"""Operations: metrics, gRPC health, structured call logs."""
