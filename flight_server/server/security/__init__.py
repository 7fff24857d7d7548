"""Who may do what: users and grants, authentication, ticket signing, TLS, request bounds,
the storage policy and private state files."""
