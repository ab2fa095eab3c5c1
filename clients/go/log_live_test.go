package koinon

// The answer log against the suite's live Daphne (issue 51): tests/clients/test_go_client.py
// prepares it (tests/clients/conftest.py, `log_scenario`) and names what it made — a genuine
// answer, one a database owner rewrote, a kept checkpoint and a forked one — in KOINON_LOG_*.

import (
	"testing"
)

func logged(t *testing.T, client *Client, variable string) *AnswerResponse {
	t.Helper()
	answer, err := client.Run(testContext(t), required(t, variable))
	if err != nil || answer.Release == nil {
		t.Fatalf("%s: %v", variable, err)
	}
	return answer
}

func inclusion(t *testing.T, client *Client, answer *AnswerResponse, key, kept string) (*Checkpoint, error) {
	t.Helper()
	options := InclusionOptions{VerifierKey: key, Checkpoint: kept}
	return answer.Release.VerifyInclusion(testContext(t), client, answer.Raw, options)
}

func TestAGenuineAnswerIsInTheLogAndTheLatestCheckpointExtendsTheKeptOne(t *testing.T) {
	client, key := reader(t), required(t, "KOINON_LOG_VERIFIER_KEY")
	answer := logged(t, client, "KOINON_LOG_RUN")
	if !answer.Verified() {
		t.Fatalf("the receipt does not verify: %v", answer.Release.Mismatches(answer.Raw))
	}
	latest, err := inclusion(t, client, answer, key, "")
	if err != nil {
		t.Fatalf("against the latest checkpoint: %v", err)
	}
	kept := required(t, "KOINON_LOG_KEPT_CHECKPOINT")
	older, err := inclusion(t, client, answer, key, kept)
	if err != nil || older.Note != kept || !(0 < older.Size && older.Size < latest.Size) {
		t.Fatalf("against the kept checkpoint: %v %v", older, err)
	}
	if _, ok := latest.Timestamp(); !ok {
		t.Errorf("no timestamp in %q", latest.Note)
	}
	extended, err := client.VerifyConsistency(testContext(t), kept, latest.Note, key)
	if err != nil || extended.Size != latest.Size {
		t.Fatalf("the latest does not extend the kept: %v", err)
	}
	if same, err := client.VerifyConsistency(testContext(t), latest.Note, latest.Note, key); err != nil || same.Size != latest.Size {
		t.Fatalf("a checkpoint does not extend itself: %v", err)
	}
}

func TestAReceiptADatabaseOwnerRewroteFailsTheInclusionCheck(t *testing.T) {
	client, key := reader(t), required(t, "KOINON_LOG_VERIFIER_KEY")
	rewritten := logged(t, client, "KOINON_LOG_REWRITTEN_RUN")
	if !rewritten.Verified() { // the receipt alone agrees with the body
		t.Fatalf("the rewritten receipt does not match its body: %v", rewritten.Release.Mismatches(rewritten.Raw))
	}
	for _, kept := range []string{"", required(t, "KOINON_LOG_KEPT_CHECKPOINT")} {
		_, err := inclusion(t, client, rewritten, key, kept)
		if code := logCode(t, err, "a rewritten receipt"); code != "proof_invalid" {
			t.Errorf("a rewritten receipt: %s", code)
		}
	}
}

func TestAForkedLogFailsTheConsistencyCheckAndSoDoesAnOlderCheckpoint(t *testing.T) {
	client, key := reader(t), required(t, "KOINON_LOG_VERIFIER_KEY")
	latest, err := inclusion(t, client, logged(t, client, "KOINON_LOG_RUN"), key, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.VerifyConsistency(testContext(t), required(t, "KOINON_LOG_FORKED_CHECKPOINT"), latest.Note, key)
	if code := logCode(t, err, "a fork"); code != "inconsistent" {
		t.Errorf("a fork: %s", code)
	}
	_, err = client.VerifyConsistency(testContext(t), latest.Note, required(t, "KOINON_LOG_KEPT_CHECKPOINT"), key)
	if code := logCode(t, err, "an older checkpoint"); code != "inconsistent" {
		t.Errorf("an older checkpoint: %s", code)
	}
}

func TestTheServersCheckpointsAreRefusedUnderAKeyTheReaderDoesNotTrust(t *testing.T) {
	client := reader(t)
	other := loadLogVectors(t).Notes.VerifierKey
	_, err := inclusion(t, client, logged(t, client, "KOINON_LOG_RUN"), other, "")
	if code := logCode(t, err, "another key"); code != "forged" {
		t.Errorf("another key: %s", code)
	}
	kept := required(t, "KOINON_LOG_KEPT_CHECKPOINT")
	_, err = client.VerifyConsistency(testContext(t), kept, kept, other)
	logCode(t, err, "another key's consistency")
}
