"""The Flight server: service (RPCs), actions, wire format, tickets, registry, config, errors, serve."""
