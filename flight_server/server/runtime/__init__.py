"""The top floor: starting the server (`serve`), supervising N processes and the one-port relay."""
