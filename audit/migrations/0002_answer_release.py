"""Output releases are append-only, enforced by PostgreSQL (see docs/releases.md).

Raw SQL on purpose: triggers, partial unique indexes and non-deferrable RESTRICT foreign
keys cannot be expressed with Django's declarative operations. No app code is imported.
"""

from django.db import migrations

FORWARD = r"""
CREATE SEQUENCE audit_publication_sequence;

-- At most one release per (run, generation); a refusal made without a model call has
-- no generation and is unique per (run, reset context).
CREATE UNIQUE INDEX audit_release_run_generation_uniq
    ON audit_outputrelease (run_id, generation_id) WHERE generation_id IS NOT NULL;
CREATE UNIQUE INDEX audit_release_run_context_refusal_uniq
    ON audit_outputrelease (run_id, reset_context) WHERE generation_id IS NULL;

CREATE FUNCTION audit_release_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'koinon: output releases are append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE FUNCTION audit_release_reject_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM audit_outputrelease) THEN
        RAISE EXCEPTION 'koinon: output releases are append-only (TRUNCATE refused)'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER audit_release_no_update BEFORE UPDATE ON audit_outputrelease
    FOR EACH ROW EXECUTE FUNCTION audit_release_reject_change();
CREATE TRIGGER audit_release_no_delete BEFORE DELETE ON audit_outputrelease
    FOR EACH ROW EXECUTE FUNCTION audit_release_reject_change();
CREATE TRIGGER audit_release_no_truncate BEFORE TRUNCATE ON audit_outputrelease
    FOR EACH STATEMENT EXECUTE FUNCTION audit_release_reject_truncate();

-- Nothing may delete a row a release points at: RESTRICT, checked at once (Django's
-- default foreign keys are deferred to commit).
DO $$
DECLARE c record;
BEGIN
    FOR c IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
             WHERE conrelid = 'audit_outputrelease'::regclass AND contype = 'f'
    LOOP
        EXECUTE format('ALTER TABLE audit_outputrelease DROP CONSTRAINT %I', c.conname);
        EXECUTE format('ALTER TABLE audit_outputrelease ADD CONSTRAINT %I %s ON DELETE RESTRICT NOT DEFERRABLE',
                       c.conname, regexp_replace(c.def, '\s*DEFERRABLE INITIALLY DEFERRED', ''));
    END LOOP;
END;
$$;
"""

REVERSE = r"""
DO $$
DECLARE c record;
BEGIN
    FOR c IN SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
             WHERE conrelid = 'audit_outputrelease'::regclass AND contype = 'f'
    LOOP
        EXECUTE format('ALTER TABLE audit_outputrelease DROP CONSTRAINT %I', c.conname);
        EXECUTE format('ALTER TABLE audit_outputrelease ADD CONSTRAINT %I %s DEFERRABLE INITIALLY DEFERRED',
                       c.conname, regexp_replace(c.def, '\s*ON DELETE RESTRICT', ''));
    END LOOP;
END;
$$;
DROP TRIGGER audit_release_no_truncate ON audit_outputrelease;
DROP TRIGGER audit_release_no_delete ON audit_outputrelease;
DROP TRIGGER audit_release_no_update ON audit_outputrelease;
DROP FUNCTION audit_release_reject_truncate();
DROP FUNCTION audit_release_reject_change();
DROP INDEX audit_release_run_context_refusal_uniq;
DROP INDEX audit_release_run_generation_uniq;
DROP SEQUENCE audit_publication_sequence;
"""


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
