"""The one erasure path (issue 28; docs/erasure.md).

`koinon_erase_revision(revision, user, reason, strings)` is a SECURITY DEFINER function
owned by the migration role. The runtime role may call it; it cannot do what it does any
other way:

- It takes only strings that occur in the revision's own texts (compared with white
  space and quotation marks removed, case folded) and are at least 12 such characters
  long; the rest are refused (counted in the log row, never replaced).
- It empties both extractions, deletes the passages (and so their vectors and search
  vectors), forgets the file's name, replaces the strings by the tombstone `[erased]` in
  every copy the answer path made (runs that drew on the revision: their questions,
  plans and bodies, messages, candidate facts, citations, cards, stream events, audits,
  publication intents, proposals, world-model claims and stances; any memory entry and
  MCP tool call) and writes the erasure log row — in the caller's transaction.
- Record triggers (stream events, MCP tool calls, a run's sealed body) let an UPDATE
  through only while `koinon.erasing` is on *and* the current user is this function's
  owner: inside the function. The runtime role can set the setting but never become the
  owner. The log itself takes rows only from the function and is never updated or
  deleted. `audit_outputrelease` holds no text and is not touched.

Raw SQL on purpose, as in audit 0002/0004. No app code is imported.
"""

from django.db import migrations

TOMBSTONE = "[erased]"

# (table, columns, json columns, scope) — scope is a WHERE clause over $1 (the run ids
# that drew on the revision) and $4 (the revision id).
SCOPED = (
    ("answers_answerrun", ("question",), ("plan", "selected_sources", "response"), "id = ANY($1)"),
    (
        "answers_conversation",
        ("title",),
        (),
        "id IN (SELECT conversation_id FROM answers_answerrun WHERE id = ANY($1))",
    ),
    ("answers_message", ("text",), (), "run_id = ANY($1)"),
    ("answers_candidatefact", ("text", "label"), ("contributions",), "run_id = ANY($1)"),
    ("answers_citation", (), ("data",), "run_id = ANY($1)"),
    ("answers_card", (), ("data",), "run_id = ANY($1)"),
    ("audit_streamevent", (), ("data",), "run_id = ANY($1)"),
    ("audit_answeraudit", (), ("plan", "generations", "memories_used"), "run_id = ANY($1)"),
    ("conversations_publicationintent", ("text", "title"), (), "run_id = ANY($1)"),
    (
        "knowledge_knowledgeproposal",
        ("title", "body", "reason", "review_note"),
        ("capture",),
        "(capture->>'run_id') = ANY($1::text[]) OR approved_version_id IN "
        "(SELECT id FROM knowledge_knowledgeversion WHERE revision_id = $4)",
    ),
    ("worldmodel_worldclaim", ("question", "text"), (), "run_id = ANY($1)"),
    ("memory_memoryentry", ("text",), ("origin", "sources"), "true"),
    ("mcp_server_toolcall", (), ("arguments",), "true"),
)


def _scoped_updates(scoped=SCOPED) -> str:
    lines = []
    for table, texts, jsons, scope in scoped:
        sets = [f"{c} = koinon_erase_in({c}, $2, $3)" for c in texts]
        sets += [f"{c} = koinon_erase_in({c}::text, $5, $3)::jsonb" for c in jsons]
        changed = [f"koinon_erase_in({c}, $2, $3) IS DISTINCT FROM {c}" for c in texts]
        changed += [f"koinon_erase_in({c}::text, $5, $3) IS DISTINCT FROM {c}::text" for c in jsons]
        statement = (
            f"UPDATE {table} SET {', '.join(sets)} WHERE ({scope}) AND ({' OR '.join(changed)})"  # noqa: S608 - constant names above
        )
        lines.append(
            f"    EXECUTE {_quote(statement)} USING v_runs, v_strings, tombstone, p_revision, "
            f"v_json;\n"
            f"    GET DIAGNOSTICS v_n = ROW_COUNT;\n"
            f"    v_counts := v_counts || jsonb_build_object('{table}', v_n);\n"
        )
    return "".join(lines)


def _quote(statement: str) -> str:
    return "'" + statement.replace("'", "''") + "'"


FORWARD = r"""
CREATE FUNCTION koinon_erasing() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('koinon.erasing', true), '') = 'on'
       AND current_user = (SELECT pg_get_userbyid(p.proowner) FROM pg_proc p
                           WHERE p.proname = 'koinon_erase_revision' LIMIT 1)
$$;

CREATE FUNCTION koinon_erase_key(t text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT regexp_replace(translate(lower(coalesce(t, '')), '“”‘’"''', ''), '\s+', '', 'g')
$$;

CREATE FUNCTION koinon_erase_in(t text, strings text[], tombstone text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE s text;
BEGIN
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    FOREACH s IN ARRAY strings LOOP
        IF strpos(t, s) > 0 THEN
            t := replace(t, s, tombstone);
        END IF;
    END LOOP;
    RETURN t;
END;
$$;

-- Records let an UPDATE through inside the erasure path only.
CREATE OR REPLACE FUNCTION koinon_record_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND koinon_erasing() THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'koinon: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE OR REPLACE FUNCTION answers_run_response_once() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.response IS NOT DISTINCT FROM OLD.response THEN
        RETURN NEW;
    END IF;
    IF NEW.response IS NOT NULL AND OLD.response IS NOT NULL AND koinon_erasing() THEN
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

-- The erasure log: rows come from the erasure function only, and stay.
CREATE FUNCTION knowledge_erasure_insert_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF koinon_erasing() THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'koinon: the erasure log is written by koinon_erase_revision only'
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE FUNCTION knowledge_erasure_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'koinon: the erasure log is append-only (% refused)', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER knowledge_erasure_insert_guard BEFORE INSERT ON knowledge_erasure
    FOR EACH ROW EXECUTE FUNCTION knowledge_erasure_insert_guard();
CREATE TRIGGER knowledge_erasure_no_update BEFORE UPDATE ON knowledge_erasure
    FOR EACH ROW EXECUTE FUNCTION knowledge_erasure_reject_change();
CREATE TRIGGER knowledge_erasure_no_delete BEFORE DELETE ON knowledge_erasure
    FOR EACH ROW EXECUTE FUNCTION knowledge_erasure_reject_change();
CREATE TRIGGER knowledge_erasure_no_truncate BEFORE TRUNCATE ON knowledge_erasure
    FOR EACH STATEMENT EXECUTE FUNCTION koinon_record_reject_truncate();

""".replace("__TOMBSTONE__", TOMBSTONE)

# The function alone, over a list of scoped copies (0015 replaces it when the copies change).
ERASE_FUNCTION = r"""
CREATE FUNCTION koinon_erase_revision(
    p_revision bigint, p_user integer, p_reason text, p_strings text[]
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    tombstone constant text := '__TOMBSTONE__';
    v_document bigint;
    v_texts text;
    v_strings text[];
    v_json text[];
    v_runs uuid[];
    v_counts jsonb := '{}';
    v_n bigint;
    v_id bigint;
BEGIN
    SELECT document_id INTO v_document FROM knowledge_documentrevision WHERE id = p_revision;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'koinon: no revision %', p_revision USING ERRCODE = 'no_data_found';
    END IF;
    IF char_length(btrim(coalesce(p_reason, ''))) = 0 OR char_length(p_reason) > 500 THEN
        RAISE EXCEPTION 'koinon: an erasure needs a reason (1 to 500 characters)'
            USING ERRCODE = 'check_violation';
    END IF;
    -- Ordered with a publication's FOR SHARE read of the document (answers recheck).
    PERFORM 1 FROM knowledge_document WHERE id = v_document FOR UPDATE;
    IF EXISTS (SELECT 1 FROM knowledge_erasure WHERE revision_id = p_revision) THEN
        RAISE EXCEPTION 'koinon: revision % is already erased', p_revision
            USING ERRCODE = 'unique_violation';
    END IF;

    SELECT coalesce(string_agg(koinon_erase_key(text) || ' ' || koinon_erase_key(norm_text),
                               ' '), '')
      INTO v_texts FROM knowledge_extraction WHERE revision_id = p_revision;
    SELECT coalesce(array_agg(s ORDER BY char_length(s) DESC, s), '{}') INTO v_strings
      FROM (SELECT DISTINCT s FROM unnest(coalesce(p_strings, '{}')) AS s
             WHERE char_length(koinon_erase_key(s)) >= 12
               AND strpos(v_texts, koinon_erase_key(s)) > 0) AS taken;
    -- The same strings as they stand inside JSON text (escaped, without the quotes).
    SELECT coalesce(array_agg(substr(j, 2, char_length(j) - 2) ORDER BY n), '{}') INTO v_json
      FROM (SELECT to_jsonb(s)::text AS j, n
              FROM unnest(v_strings) WITH ORDINALITY AS u(s, n)) AS escaped;
    v_counts := jsonb_build_object(
        'strings', cardinality(v_strings),
        'refused', (SELECT count(DISTINCT s) FROM unnest(coalesce(p_strings, '{}')) AS s)
                   - cardinality(v_strings));
    SELECT coalesce(array_agg(DISTINCT run_id), '{}') INTO v_runs
      FROM answers_candidatefact WHERE source->>'revision_id' = p_revision::text;

    PERFORM set_config('koinon.erasing', 'on', true);

    -- The revision's own text: passages (with their vectors), both extractions, the file.
    DELETE FROM knowledge_passage WHERE revision_id = p_revision;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('knowledge_passage', v_n);
    UPDATE knowledge_extraction
       SET text = '', norm_text = '', serves_passages = false, status = 'erased',
           progress = 0, error_code = ''
     WHERE revision_id = p_revision;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('knowledge_extraction', v_n);
    UPDATE knowledge_documentrevision SET file = '' WHERE id = p_revision;
    UPDATE knowledge_knowledgeversion SET body = tombstone WHERE revision_id = p_revision;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('knowledge_knowledgeversion', v_n);
    UPDATE worldmodel_worldstance SET quote = tombstone WHERE revision_id = p_revision;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_counts := v_counts || jsonb_build_object('worldmodel_worldstance', v_n);

    -- Every copy the answer path made.
__SCOPED__
    INSERT INTO knowledge_erasure (revision_id, document_id, erased_by_id, reason, erased_at,
                                   counts)
    VALUES (p_revision, v_document, p_user, btrim(p_reason), now(), v_counts)
    RETURNING id INTO v_id;

    PERFORM set_config('koinon.erasing', '', true);
    RETURN v_id;
END;
$fn$;
"""


def erase_function_sql(scoped=SCOPED) -> str:
    return (
        ERASE_FUNCTION.lstrip()
        .replace("__TOMBSTONE__", TOMBSTONE)
        .replace("__SCOPED__", _scoped_updates(scoped))
    )


FORWARD += erase_function_sql()

REVERSE = r"""
DROP FUNCTION koinon_erase_revision(bigint, integer, text, text[]);
DROP TRIGGER knowledge_erasure_insert_guard ON knowledge_erasure;
DROP TRIGGER knowledge_erasure_no_update ON knowledge_erasure;
DROP TRIGGER knowledge_erasure_no_delete ON knowledge_erasure;
DROP TRIGGER knowledge_erasure_no_truncate ON knowledge_erasure;
DROP FUNCTION knowledge_erasure_reject_change();
DROP FUNCTION knowledge_erasure_insert_guard();

CREATE OR REPLACE FUNCTION koinon_record_reject_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'koinon: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE OR REPLACE FUNCTION answers_run_response_once() RETURNS trigger
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

DROP FUNCTION koinon_erase_in(text, text[], text);
DROP FUNCTION koinon_erase_key(text);
DROP FUNCTION koinon_erasing();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0012_erasure"),
        ("audit", "0004_append_only_records"),
        ("answers", "0004_generation_recovery"),
        ("conversations", "0001_initial"),
        ("memory", "0003_memory_entries_name"),
        ("mcp_server", "0001_initial"),
        ("worldmodel", "0001_initial"),
    ]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
