"""`/mcp` accepting this server's own OAuth access tokens.

An access token is accepted while it, its grant (the consent) and its client are all
unrevoked and it is unexpired, and only when the grant's resource is this server's `/mcp`
(RFC 8707: a token for another resource is refused here even if this server issued it). The
principal it yields is a `ConsentedPrincipal`: the workspaces the user ticked on the consent
page, which authorization intersects with the principal's own grants at every call.
"""

from __future__ import annotations

import logging

from notes_server.features.oauth import secrets
from notes_server.security.principals import ConsentedPrincipal
from notes_server.tools.services import Services

log = logging.getLogger("notes_server.auth")


class AccessTokenVerifier:
    def __init__(self, services: Services, resource: str) -> None:
        self.services = services
        self.resource = resource

    def principal_for(self, presented: str) -> ConsentedPrincipal | None:
        from notes_server.store import oauth
        from notes_server.store.engine import read_tx

        if not secrets.well_formed(presented, secrets.ACCESS_PREFIX):
            return None
        with read_tx(self.services.engine) as conn:
            found = oauth.find_token(
                conn, secrets.digest(presented), "access", self.services.clock()
            )
        if found is None:
            log.info("OAuth access token rejected: unknown, revoked or expired")
            return None
        if found.grant.resource != self.resource:
            log.info("OAuth access token rejected: issued for another resource")
            return None
        return ConsentedPrincipal(found.grant.principal, frozenset(found.grant.workspaces))
