-- The runtime role koinon_app (created by primary-init.sh) owns nothing: read and write on
-- the app's tables and sequences, only SELECT and INSERT on the record tables
-- (core.embedded.RECORD_TABLES; docs/releases.md, "Owner role versus runtime role"); no
-- temporary schema and no CREATE in `public`, so it owns no function and can make none
-- (core.embedded.RUNTIME_GRANTS).
-- Grants cover the tables that exist: the `migrate` service runs this after every
-- migration, as the owner, straight to the primary. tests/test_deploy.py keeps the
-- REVOKE list equal to RECORD_TABLES.
DO $$
BEGIN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO koinon_app', current_database());
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM koinon_app', current_database());
END
$$;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM koinon_app;
GRANT USAGE ON SCHEMA public TO koinon_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO koinon_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO koinon_app;
REVOKE UPDATE, DELETE, TRUNCATE ON
    audit_outputrelease,
    audit_streamevent,
    audit_answeraudit,
    audit_auditstep,
    mcp_server_toolcall,
    knowledge_erasure,
    audit_logentry,
    audit_logcheckpoint,
    audit_logsubtree,
    outside_snapshot
FROM koinon_app;
