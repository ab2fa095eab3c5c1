package koinon

// The answer log's shared vectors (clients/conformance/log_vectors.json): RFC 9162 hashes and
// proofs, C2SP signed checkpoints, log entries rebuilt from receipts. No server needed.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
)

type logVectors struct {
	Leaves []struct {
		Entry    string `json:"entry"`
		LeafHash string `json:"leaf_hash"`
	} `json:"leaves"`
	Inclusion []struct {
		Index    int64    `json:"index"`
		TreeSize int64    `json:"tree_size"`
		LeafHash string   `json:"leaf_hash"`
		Proof    []string `json:"proof"`
		Root     string   `json:"root"`
	} `json:"inclusion"`
	Consistency []struct {
		OldSize int64    `json:"old_size"`
		NewSize int64    `json:"new_size"`
		OldRoot string   `json:"old_root"`
		NewRoot string   `json:"new_root"`
		Proof   []string `json:"proof"`
	} `json:"consistency"`
	Notes struct {
		VerifierKey string `json:"verifier_key"`
		Valid       []struct {
			Name       string   `json:"name"`
			Note       string   `json:"note"`
			Size       int64    `json:"size"`
			Root       string   `json:"root"`
			Extensions []string `json:"extensions"`
		} `json:"valid"`
		Rejected []struct {
			Name string `json:"name"`
			Note string `json:"note"`
			Code string `json:"code"`
		} `json:"rejected"`
	} `json:"notes"`
	Entries []struct {
		Name        string `json:"name"`
		BodyJSON    string `json:"body_json"`
		ServedEntry string `json:"served_entry"`
		Entry       string `json:"entry"`
		LeafHash    string `json:"leaf_hash"`
	} `json:"entries"`
}

func loadLogVectors(t *testing.T) logVectors {
	t.Helper()
	data, err := os.ReadFile("../conformance/log_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v logVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func b64(t *testing.T, text string) []byte {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func hashes(t *testing.T, texts []string) [][]byte {
	t.Helper()
	out, err := ProofHashes(texts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func flipped(t *testing.T, text string) []byte {
	data := b64(t, text)
	data[0] ^= 1
	return data
}

// logCode is the Code of an ErrLogUnverified error; the test fails for any other error.
func logCode(t *testing.T, err error, what string) string {
	t.Helper()
	var e *Error
	if !errors.Is(err, ErrLogUnverified) || !errors.As(err, &e) {
		t.Fatalf("%s: want a log verification error, got %v", what, err)
	}
	return e.Code
}

func TestEveryLeafHashAndEveryInclusionProofLeadsToItsRootAndNoOther(t *testing.T) {
	v := loadLogVectors(t)
	for _, leaf := range v.Leaves {
		if got := base64.StdEncoding.EncodeToString(LeafHash([]byte(leaf.Entry))); got != leaf.LeafHash {
			t.Errorf("leaf %s: %s", leaf.Entry, got)
		}
	}
	if len(v.Inclusion) < 91 {
		t.Fatalf("only %d inclusion vectors", len(v.Inclusion))
	}
	for _, p := range v.Inclusion {
		leaf, proof := b64(t, p.LeafHash), hashes(t, p.Proof)
		if err := VerifyInclusion(leaf, p.Index, p.TreeSize, proof, b64(t, p.Root)); err != nil {
			t.Errorf("%d of %d: %v", p.Index, p.TreeSize, err)
		}
		if code := logCode(t, VerifyInclusion(leaf, p.Index, p.TreeSize, proof, flipped(t, p.Root)), "another root"); code != "proof_invalid" {
			t.Errorf("%d of %d under another root: %s", p.Index, p.TreeSize, code)
		}
		if p.TreeSize > 1 {
			logCode(t, VerifyInclusion(leaf, (p.Index+1)%p.TreeSize, p.TreeSize, proof, b64(t, p.Root)), "another index")
		}
	}
}

func TestEveryConsistencyProofHoldsAndAForkOfTheNewerTreeDoesNot(t *testing.T) {
	v := loadLogVectors(t)
	if len(v.Consistency) < 91 {
		t.Fatalf("only %d consistency vectors", len(v.Consistency))
	}
	for _, p := range v.Consistency {
		proof := hashes(t, p.Proof)
		if err := VerifyConsistency(p.OldSize, p.NewSize, b64(t, p.OldRoot), b64(t, p.NewRoot), proof); err != nil {
			t.Errorf("%d → %d: %v", p.OldSize, p.NewSize, err)
		}
		fork := VerifyConsistency(p.OldSize, p.NewSize, b64(t, p.OldRoot), flipped(t, p.NewRoot), proof)
		if code := logCode(t, fork, "a fork"); code != "inconsistent" {
			t.Errorf("%d → %d forked: %s", p.OldSize, p.NewSize, code)
		}
		logCode(t, VerifyConsistency(p.OldSize, p.NewSize, flipped(t, p.OldRoot), b64(t, p.NewRoot), proof), "another old root")
	}
}

func TestGenuineCheckpointsOpenAndEveryRefusedNoteIsRefusedWithItsCode(t *testing.T) {
	v := loadLogVectors(t)
	key := v.Notes.VerifierKey
	verifier, err := ParseVerifier(key)
	if err != nil || verifier.KeyString() != key {
		t.Fatalf("the verifier key: %v", err)
	}
	for _, n := range v.Notes.Valid {
		opened, err := OpenCheckpoint(n.Note, key)
		if err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
		got := []any{opened.Size, base64.StdEncoding.EncodeToString(opened.Root), opened.Extensions, opened.Note}
		if !reflect.DeepEqual(got, []any{n.Size, n.Root, n.Extensions, n.Note}) {
			t.Errorf("%s: %v", n.Name, got)
		}
	}
	if opened, _ := OpenCheckpoint(v.Notes.Valid[0].Note, key); opened != nil {
		if seconds, ok := opened.Timestamp(); !ok || seconds != 1767225600 {
			t.Errorf("timestamp %d %v", seconds, ok)
		}
	}
	if len(v.Notes.Rejected) < 8 {
		t.Fatalf("only %d refused notes", len(v.Notes.Rejected))
	}
	for _, n := range v.Notes.Rejected {
		_, err := OpenCheckpoint(n.Note, key)
		if code := logCode(t, err, n.Name); code != n.Code {
			t.Errorf("%s: %s, want %s", n.Name, code, n.Code)
		}
	}
	for _, broken := range []string{"", "koinon.example/answers+00000000+AQ==", strings.Replace(key, "+", "+f", 1)} {
		_, err := ParseVerifier(broken)
		if code := logCode(t, err, broken); code != "malformed" {
			t.Errorf("%q: %s", broken, code)
		}
	}
}

func TestTheLogEntryIsRebuiltFromTheReceiptAsTheServerBuildsIt(t *testing.T) {
	v := loadLogVectors(t)
	for _, e := range v.Entries {
		entry, err := LogEntry([]byte(e.BodyJSON), []byte(e.ServedEntry))
		if err != nil || string(entry) != e.Entry {
			t.Errorf("%s: %s %v", e.Name, entry, err)
		}
		if got := base64.StdEncoding.EncodeToString(LeafHash(entry)); got != e.LeafHash {
			t.Errorf("%s: leaf %s", e.Name, got)
		}
	}
	_, err := LogEntry([]byte(v.Entries[0].BodyJSON), []byte("{}"))
	logCode(t, err, "a served entry without its fields")
}

type refusing struct{}

func (refusing) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no request for a receipt the body does not match")
}

func TestAReleaseWhoseBodyDoesNotMatchIsRefusedBeforeAnyRequest(t *testing.T) {
	body := []byte(loadLogVectors(t).Entries[0].BodyJSON)
	answer, err := ParseAnswer(body)
	if err != nil || answer.Release == nil {
		t.Fatalf("%v", err)
	}
	client := New("http://koinon.invalid", "kn_test")
	client.HTTP = &http.Client{Transport: refusing{}}
	_, err = answer.Release.VerifyInclusion(context.Background(), client, body, InclusionOptions{VerifierKey: "unused"})
	if code := logCode(t, err, "a body that does not match"); code != "receipt" {
		t.Fatalf("code %s", code)
	}
}
