"""Who may talk to the server, and how much: the Host/Origin guard, credentials
(the API key or a token) and the owner they prove, quotas, and the bounds on
how a request arrives."""
