"""The query path shared by the JSON-command and Flight SQL front ends."""
