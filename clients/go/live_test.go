package koinon

// The client against the suite's live Daphne and Celery worker, on the library corpus
// (tests/clients/test_go_client.py starts them and sets KOINON_URL and the keys).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	question = "Who owns service reviews?"
	mixed    = "Who owns service reviews, what currency is the invoice dataset in, and what is the total amount of the invoices?"
	owners   = "The platform operations team owns service reviews."
)

// required is an environment value the pytest driver sets; missing, the test fails.
func required(t *testing.T, name string) string {
	t.Helper()
	value := os.Getenv(name)
	if value == "" {
		t.Fatalf("%s is not set: run these tests through tests/clients/test_go_client.py", name)
	}
	return value
}

func reader(t *testing.T) *Client { return New(required(t, "KOINON_URL"), required(t, "KOINON_KEY")) }

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a guard, not a measure
	t.Cleanup(cancel)
	return ctx
}

// cutting is a transport whose every event stream is cut after its first event, as a
// dropped connection would be; it records each events request's Last-Event-ID.
type cutting struct {
	mu      sync.Mutex
	cursors []string
}

func (c *cutting) RoundTrip(request *http.Request) (*http.Response, error) {
	response, err := http.DefaultTransport.RoundTrip(request)
	if err != nil || !strings.HasSuffix(request.URL.Path, "/events") {
		return response, err
	}
	c.mu.Lock()
	c.cursors = append(c.cursors, request.Header.Get("Last-Event-ID"))
	c.mu.Unlock()
	response.Body = &firstEventOnly{body: response.Body}
	return response, nil
}

type firstEventOnly struct {
	body io.ReadCloser
	seen []byte
	left []byte
	cut  bool
}

func (f *firstEventOnly) Read(p []byte) (int, error) {
	for !f.cut {
		chunk := make([]byte, 4096)
		n, err := f.body.Read(chunk)
		f.seen = append(f.seen, chunk[:n]...)
		if end := bytes.Index(f.seen, []byte("\n\n")); end >= 0 {
			f.left, f.cut = f.seen[:end+2], true
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if len(f.left) == 0 {
		return 0, io.ErrUnexpectedEOF // connection dropped (test)
	}
	n := copy(p, f.left)
	f.left = f.left[n:]
	return n, nil
}

func (f *firstEventOnly) Close() error { return f.body.Close() }

func TestAStrictPolicyAnswerVerifiesAndOneChangedCharacterIsReportedByName(t *testing.T) {
	policy := &EvidencePolicy{Mode: "strict", RequiredTools: []string{"keyword_search"}}
	answer, err := reader(t).Answer(testContext(t), AnswerRequest{Query: mixed, EvidencePolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	if !answer.EvidenceBacked() || answer.Evidence.Policy.Mode != "strict" ||
		!reflect.DeepEqual(answer.Evidence.Policy.RequiredTools, []string{"keyword_search"}) {
		t.Fatalf("not a strict, evidence-backed answer: %+v", answer.Evidence)
	}
	if !strings.Contains(answer.Answer.Text, owners) || len(answer.Answer.Citations) < 2 || len(answer.Answer.Cards) < 1 {
		t.Fatalf("unexpected answer: %s", answer.Raw)
	}
	if answer.Release.PolicyVersion != "2" || !answer.Verified() {
		t.Fatalf("does not verify: %v", answer.Release.Mismatches(answer.Raw))
	}
	for _, part := range []string{"text", "citations", "cards", "policy"} {
		got := answer.Release.Mismatches(oneCharacterChanged(t, answer.Raw, part))
		if !reflect.DeepEqual(got, []string{part + "_sha256"}) {
			t.Errorf("%s changed: %v", part, got)
		}
	}
}

func collectEvents(t *testing.T, client *Client, runID, cursor string) []Event {
	t.Helper()
	var events []Event
	if err := client.Events(testContext(t), runID, cursor, func(e Event) error {
		events = append(events, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return events
}

func ids(events []Event) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

func TestAStreamInterruptedAfterEachEventResumesWithoutLossOrRepeat(t *testing.T) {
	client := reader(t)
	created, err := client.Answer(testContext(t), AnswerRequest{Query: question})
	if err != nil {
		t.Fatal(err)
	}
	replayed := collectEvents(t, client, created.RunID, "")
	if len(replayed) < 3 || replayed[len(replayed)-1].Event != "completed" {
		t.Fatalf("replay: %v", ids(replayed))
	}
	for n, e := range replayed {
		if want := created.RunID + ":1:" + strconv.Itoa(n+1); e.ID != want {
			t.Fatalf("event %d is %s, want %s", n, e.ID, want)
		}
	}
	transport := &cutting{}
	cut := New(client.BaseURL, client.APIKey)
	cut.HTTP = &http.Client{Transport: transport}
	resumed := collectEvents(t, cut, created.RunID, "")
	if !reflect.DeepEqual(ids(resumed), ids(replayed)) {
		t.Fatalf("resumed %v, want %v", ids(resumed), ids(replayed))
	}
	for n := range resumed {
		if !bytes.Equal(resumed[n].Data, replayed[n].Data) {
			t.Errorf("event %s differs", resumed[n].ID)
		}
	}
	want := append([]string{""}, ids(replayed)[:len(replayed)-1]...)
	if !reflect.DeepEqual(transport.cursors, want) {
		t.Errorf("cursors %v, want %v", transport.cursors, want)
	}
	if rest := collectEvents(t, client, created.RunID, replayed[1].ID); !reflect.DeepEqual(ids(rest), ids(replayed[2:])) {
		t.Errorf("after a cursor: %v", ids(rest))
	}
	cut.HTTP = &http.Client{Transport: &cutting{}}
	collected, err := cut.Collect(testContext(t), created.RunID, "")
	if err != nil || !collected.Verified() || collected.Release.ID != created.Release.ID {
		t.Fatalf("collected through a cut stream: %v", err)
	}
	stored, err := client.Run(testContext(t), created.RunID)
	if err != nil || !bytes.Equal(compact(t, stored.Raw), compact(t, collected.Raw)) {
		t.Fatalf("the collected body is not the stored one: %v", err)
	}
}

func compact(t *testing.T, raw []byte) []byte {
	form, err := CanonicalV1(raw)
	if err != nil {
		t.Fatal(err)
	}
	return form
}

func TestAStreamedRunStartedByTheClientIsCollectedFromTheWorker(t *testing.T) {
	client := reader(t)
	runID, err := client.Start(testContext(t), AnswerRequest{Query: question})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := client.Collect(testContext(t), runID, "")
	if err != nil || answer.RunID != runID || !answer.EvidenceBacked() || !answer.Verified() {
		t.Fatalf("collected %v: %v", answer, err)
	}
}

func TestAnOutsidersRunIDIsTheNotFoundErrorAsAMissingOne(t *testing.T) {
	outsider := New(required(t, "KOINON_URL"), required(t, "KOINON_OUTSIDER_KEY"))
	theirs, err := outsider.Answer(testContext(t), AnswerRequest{Query: question})
	if err != nil {
		t.Fatal(err)
	}
	client := reader(t)
	_, err = client.Run(testContext(t), "00000000-0000-4000-8000-000000000000")
	var missing *Error
	if !errors.As(err, &missing) || !errors.Is(err, ErrNotFound) || missing.Status != 404 || missing.Code != "not_found" {
		t.Fatalf("a missing run: %v", err)
	}
	attempts := map[string]func() error{
		"run":   func() error { _, err := client.Run(testContext(t), theirs.RunID); return err },
		"audit": func() error { _, err := client.Audit(testContext(t), theirs.RunID); return err },
		"events": func() error {
			return client.Events(testContext(t), theirs.RunID, "", func(Event) error { return errors.New("an event") })
		},
	}
	for name, attempt := range attempts {
		var foreign *Error
		err := attempt()
		if !errors.Is(err, ErrNotFound) || !errors.As(err, &foreign) || foreign.Code != missing.Code || foreign.Message != missing.Message {
			t.Errorf("%s of someone else's run: %v", name, err)
		}
	}
}

func TestA422NamesItsFieldsAndA401IsTyped(t *testing.T) {
	client := reader(t)
	_, err := client.Answer(testContext(t), AnswerRequest{Query: "   "})
	var empty *Error
	if !errors.Is(err, ErrValidation) || !errors.As(err, &empty) || empty.Status != 422 || empty.Code != "empty_query" {
		t.Fatalf("an empty query: %v", err)
	}
	if _, ok := empty.Fields["query"]; !ok {
		t.Errorf("fields %v do not name query", empty.Fields)
	}
	policy := &EvidencePolicy{Mode: "strict", AllowedTools: []string{"telepathy"}}
	_, err = client.Answer(testContext(t), AnswerRequest{Query: question, EvidencePolicy: policy})
	var invalid *Error
	if !errors.Is(err, ErrValidation) || !errors.As(err, &invalid) || invalid.Code != "invalid_policy" {
		t.Fatalf("an unknown tool: %v", err)
	}
	named := false
	for field := range invalid.Fields {
		named = named || strings.HasPrefix(field, "evidence_policy")
	}
	if !named {
		t.Errorf("fields %v do not name the policy", invalid.Fields)
	}
	stranger := New(client.BaseURL, "kn_"+strings.Repeat("x", 43))
	_, err = stranger.Answer(testContext(t), AnswerRequest{Query: question})
	var unknown *Error
	if !errors.Is(err, ErrAuthentication) || !errors.As(err, &unknown) || unknown.Code != "invalid_credentials" {
		t.Fatalf("an unknown key: %v", err)
	}
}

func TestUploadAndSearchThroughTheClient(t *testing.T) {
	client := reader(t)
	uploaded, err := client.UploadDocument(testContext(t), Upload{
		Filename: "note.txt", Private: true, Title: "Budget note",
		Content: []byte("My private note: the quarterly budget meeting moved to Thursday."),
	})
	if err != nil || uploaded["private"] != true || uploaded["created"] != true || uploaded["revision"] == nil {
		t.Fatalf("upload: %v %v", uploaded, err)
	}
	found, err := client.Search(testContext(t), SearchRequest{Query: "operations team service reviews", Limit: 5})
	if err != nil || found.Label != "unverified" {
		t.Fatalf("search: %v %v", found, err)
	}
	hit := false
	for _, result := range found.Results {
		text, _ := result["text"].(string)
		hit = hit || strings.Contains(text, owners)
	}
	if !hit {
		t.Errorf("no result holds the quote: %v", found.Results)
	}
}

type replaying struct{ requests []string }

func (r *replaying) RoundTrip(request *http.Request) (*http.Response, error) {
	r.requests = append(r.requests, request.Header.Get("Last-Event-ID"))
	body := "id: r:1:1\nevent: started\ndata: {\"run_id\": \"r\", \"generation\": 1}\n\n"
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: request}, nil
}

func TestAStreamThatNeverProgressesEndsInAStreamErrorWithoutRepeats(t *testing.T) {
	transport := &replaying{}
	client := New("http://koinon.invalid", "kn_test")
	client.HTTP, client.MaxReconnects = &http.Client{Transport: transport}, 3
	var received []string
	err := client.Events(testContext(t), "r", "", func(e Event) error {
		received = append(received, e.ID)
		return nil
	})
	var stream *Error
	if !errors.Is(err, ErrStream) || !errors.As(err, &stream) || stream.Code != "stream_interrupted" {
		t.Fatalf("got %v", err)
	}
	if !reflect.DeepEqual(received, []string{"r:1:1"}) || !reflect.DeepEqual(transport.requests, []string{"", "r:1:1", "r:1:1", "r:1:1"}) {
		t.Fatalf("received %v over %v", received, transport.requests)
	}
}
