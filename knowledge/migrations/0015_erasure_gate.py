"""The erasure gate tied to the one erasure function (issue 48, items 1, 2 and 6).

- `koinon_erasing()` took "inside the erasure function" to mean "the current user owns a
  function named koinon_erase_revision", the first such row of pg_proc. Any role may create
  functions in its temporary schema: the runtime role made `pg_temp.koinon_erase_revision`,
  set `koinon.erasing`, and rewrote sealed bodies and the erasure log. It now compares with
  the owner of *the* function, `public.koinon_erase_revision(bigint, integer, text, text[])`
  by its signature (a regprocedure, resolved in `public` only).
- The trigger functions name every function and table with its schema and search
  `pg_catalog, public` with the temporary schema last: a temporary table named like a
  record (`audit_streamevent`, holding a forged `completed` event) is never what they read.
- No role but the owners gets TEMPORARY on the database or CREATE in `public`: the runtime
  role owns no function and can create none (core.embedded.ensure_runtime_role revokes
  both from it by name too).
- The run's audit is now a row per generation plus `audit_auditstep` (audit 0007): the
  erasure function rewrites those; and every knowledge proposal holding an erased string,
  hand-written ones too (they were scrubbed only when captured from a run or approved
  from the revision).

Raw SQL on purpose, as in 0013. No app code is imported.
"""

import importlib

from django.db import migrations

erasure_path = importlib.import_module("knowledge.migrations.0013_erasure_path")

SCOPED = tuple(
    entry
    for entry in erasure_path.SCOPED
    if entry[0] not in ("audit_answeraudit", "knowledge_knowledgeproposal")
) + (
    ("audit_answeraudit", (), ("plan", "generation"), "run_id = ANY($1)"),
    ("audit_auditstep", (), ("step",), "run_id = ANY($1)"),
    (
        "knowledge_knowledgeproposal",
        ("title", "body", "reason", "review_note"),
        ("capture",),
        "true",
    ),
)

SEARCH = "SET search_path = pg_catalog, public, pg_temp"

GATE = r"""
CREATE OR REPLACE FUNCTION public.koinon_erasing() RETURNS boolean
LANGUAGE sql STABLE __SEARCH__ AS $$
    SELECT coalesce(current_setting('koinon.erasing', true), '') = 'on'
       AND current_user = (
           SELECT pg_get_userbyid(p.proowner) FROM pg_catalog.pg_proc p
            WHERE p.oid = 'public.koinon_erase_revision(bigint, integer, text, text[])'
                          ::pg_catalog.regprocedure)
$$;

CREATE OR REPLACE FUNCTION public.koinon_record_reject_change() RETURNS trigger
LANGUAGE plpgsql __SEARCH__ AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND public.koinon_erasing() THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'koinon: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE OR REPLACE FUNCTION public.knowledge_erasure_insert_guard() RETURNS trigger
LANGUAGE plpgsql __SEARCH__ AS $$
BEGIN
    IF public.koinon_erasing() THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'koinon: the erasure log is written by koinon_erase_revision only'
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE OR REPLACE FUNCTION public.answers_run_response_once() RETURNS trigger
LANGUAGE plpgsql __SEARCH__ AS $$
BEGIN
    IF NEW.response IS NOT DISTINCT FROM OLD.response THEN
        RETURN NEW;
    END IF;
    IF NEW.response IS NOT NULL AND OLD.response IS NOT NULL AND public.koinon_erasing() THEN
        RETURN NEW;
    END IF;
    IF NEW.response IS NULL
       OR (OLD.response IS NOT NULL AND
           (NEW.response->>'generation')::int <= (OLD.response->>'generation')::int)
       OR NOT EXISTS (
           SELECT 1 FROM public.audit_streamevent e
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

ALTER FUNCTION public.koinon_record_reject_truncate() __SEARCH__;
ALTER FUNCTION public.knowledge_erasure_reject_change() __SEARCH__;

REVOKE CREATE ON SCHEMA public FROM PUBLIC;
DO $$
BEGIN
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
END;
$$;
""".replace("__SEARCH__", SEARCH)

FORWARD = GATE + erasure_path.erase_function_sql(SCOPED).replace(
    "CREATE FUNCTION koinon_erase_revision(", "CREATE OR REPLACE FUNCTION koinon_erase_revision(", 1
)

# Back to 0013's erasure function (the audit of one row per run, captured proposals only);
# the gate stays tied to the function, as a safer reading of 0013's own intent.
REVERSE = (
    "DO $$ BEGIN EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO PUBLIC', "
    "current_database()); END; $$;\n"
) + erasure_path.erase_function_sql().replace(
    "CREATE FUNCTION koinon_erase_revision(", "CREATE OR REPLACE FUNCTION koinon_erase_revision(", 1
)


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0014_space_operating_point"),
        ("audit", "0007_audit_records"),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
