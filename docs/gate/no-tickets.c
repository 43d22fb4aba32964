/* A regression to show the gate failing (docs/gate.md). Loaded into a resolver with LD_PRELOAD,
 * it turns GnuTLS's gnutls_session_ticket_enable_server into a no-op, as a patch that dropped
 * the call would: the server issues no session tickets, so a client that asks to resume does a
 * full handshake. (GNUTLS_E_SUCCESS is 0; the types are GnuTLS's, opaque here.) */
int gnutls_session_ticket_enable_server(void *session, const void *key)
{
    (void)session;
    (void)key;
    return 0;
}
