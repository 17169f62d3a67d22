"""The built-in OAuth 2.1 authorization server (`serve --transport http --auth oauth`)."""
