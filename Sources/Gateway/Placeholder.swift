// Gateway
