"""Built-in protocols; every module here registers its protocols on import."""
