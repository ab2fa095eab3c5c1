"""Stream events, MCP tool calls and a run's sealed body are records, enforced by
PostgreSQL like output releases (issue 27, item 10; see docs/releases.md).

- `audit_streamevent` (what replays, exports and the chat serve) and `mcp_server_toolcall`
  (the MCP audit): no UPDATE, no DELETE, no TRUNCATE while rows exist.
- `answers_answerrun.response`: written once per generation. It may change only to the
  body sealed in that generation's `completed` event (itself append-only), for a newer
  generation than the one it holds; never back to NULL.

Raw SQL on purpose, as in 0002. No app code is imported.
"""

from django.db import migrations

RECORDS = ("audit_streamevent", "mcp_server_toolcall")

FORWARD = r"""
CREATE FUNCTION koinon_record_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'koinon: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE FUNCTION koinon_record_reject_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE found boolean;
BEGIN
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I)', TG_TABLE_SCHEMA, TG_TABLE_NAME)
        INTO found;
    IF found THEN
        RAISE EXCEPTION 'koinon: % rows are append-only (TRUNCATE refused)', TG_TABLE_NAME
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION answers_run_response_once() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.response IS NOT DISTINCT FROM OLD.response THEN
        RETURN NEW;
    END IF;
    IF NEW.response IS NULL
       OR (OLD.response IS NOT NULL AND
           (NEW.response->>'generation')::int <= (OLD.response->>'generation')::int)
       OR NOT EXISTS (
           SELECT 1 FROM audit_streamevent e
           WHERE e.run_id = NEW.id AND e.event = 'completed'
             AND e.generation = (NEW.response->>'generation')::int
             AND e.data->'payload'->'result' = NEW.response::jsonb)
    THEN
        RAISE EXCEPTION 'koinon: a run''s sealed body is written once per generation'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER answers_run_response_once BEFORE UPDATE OF response ON answers_answerrun
    FOR EACH ROW EXECUTE FUNCTION answers_run_response_once();
"""

for table in RECORDS:
    FORWARD += f"""
CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
    FOR EACH ROW EXECUTE FUNCTION koinon_record_reject_change();
CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION koinon_record_reject_change();
CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION koinon_record_reject_truncate();
"""

REVERSE = "DROP TRIGGER answers_run_response_once ON answers_answerrun;\n"
for table in RECORDS:
    REVERSE += "".join(
        f"DROP TRIGGER {table}_no_{op} ON {table};\n" for op in ("update", "delete", "truncate")
    )
REVERSE += """
DROP FUNCTION answers_run_response_once();
DROP FUNCTION koinon_record_reject_truncate();
DROP FUNCTION koinon_record_reject_change();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0003_release_searched"),
        ("answers", "0003_conversation_source"),
        ("mcp_server", "0001_initial"),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
