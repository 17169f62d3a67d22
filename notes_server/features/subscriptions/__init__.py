"""Change subscriptions: `subscriptions/listen` (2026-07-28) and the hub a 2025-11-25 session's
`resources/subscribe` uses, served from the store's change log (docs/subscriptions.md)."""
