// Package koinon is a client of koinon's REST API (SPEC §5, §9; docs/releases.md) using
// the standard library only. Nothing is inferred: a body without an evidence report has
// AnswerResponse.Evidence == nil — never success — and one without a release has no
// verified release.
package koinon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// EvidencePolicy says what evidence an answer may and must use. Mode: auto, strict or
// general_knowledge; AllowedTools nil leaves the server's default.
type EvidencePolicy struct {
	Mode          string   `json:"mode"`
	AllowedTools  []string `json:"allowed_tools,omitempty"`
	RequiredTools []string `json:"required_tools,omitempty"`
}

// RetrievalOutcome is one retrieval tool's outcome (Code: matched, empty_corpus,
// no_relevant_hit, timeout, …).
type RetrievalOutcome struct {
	Tool        string `json:"tool"`
	State       string `json:"state"`
	Code        string `json:"code"`
	ResultCount int    `json:"result_count"`
	Retryable   bool   `json:"retryable"`
}

// EvidenceReport is the answer's evidence report. HTTP 200 proves nothing; read this.
type EvidenceReport struct {
	Status       string             `json:"status"`        // available, absent, partial, unavailable, not_requested, unknown
	AnswerStatus string             `json:"answer_status"` // evidence_backed, partial, general_knowledge, unverified, abstained
	Policy       *EvidencePolicy    `json:"policy"`
	Sources      []map[string]any   `json:"sources"`
	Outcomes     []RetrievalOutcome `json:"outcomes"`
}

// AnswerRequest is the body of POST /v1/answer.
type AnswerRequest struct {
	Query           string          `json:"query"`
	EvidencePolicy  *EvidencePolicy `json:"evidence_policy,omitempty"`
	SpaceIDs        []int           `json:"space_ids,omitempty"`
	SelectedSources []int           `json:"selected_sources,omitempty"`
	Language        string          `json:"language,omitempty"`
	Mode            string          `json:"mode,omitempty"`
	ConversationID  *int            `json:"conversation_id,omitempty"`
}

// Answer is the released answer: the server's text, citations and cards.
type Answer struct {
	Text      string           `json:"text"`
	Language  string           `json:"language"`
	Citations []map[string]any `json:"citations"`
	Cards     []map[string]any `json:"cards"`
}

// AnswerResponse is a sealed answer body (POST /v1/answer, GET /v1/runs/<id>). Raw keeps
// the JSON as received: verify releases against it.
type AnswerResponse struct {
	RunID      string          `json:"run_id"`
	Generation *int            `json:"generation"`
	Mode       string          `json:"mode"`
	Answer     Answer          `json:"answer"`
	Evidence   *EvidenceReport `json:"-"` // nil when the body has no report
	Release    *Release        `json:"-"` // nil when no verified release was recorded
	Quality    map[string]any  `json:"quality"`
	Raw        json.RawMessage `json:"-"`
}

// EvidenceBacked is true only when the server said so: fully backed by permitted evidence.
func (a *AnswerResponse) EvidenceBacked() bool {
	return a.Evidence != nil && a.Evidence.AnswerStatus == "evidence_backed"
}

// Verified is true when a release exists and its hashes match the body.
func (a *AnswerResponse) Verified() bool {
	return a.Release != nil && a.Release.Verify(a.Raw)
}

// ParseAnswer reads a response body. A missing or malformed evidence report leaves
// Evidence nil; a release without its id, kind and four hashes leaves Release nil.
func ParseAnswer(raw []byte) (*AnswerResponse, error) {
	var parts struct {
		Evidence json.RawMessage `json:"evidence"`
		Release  json.RawMessage `json:"release"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, err
	}
	answer := &AnswerResponse{Raw: append(json.RawMessage(nil), raw...)}
	var body struct {
		RunID      string         `json:"run_id"`
		Generation *int           `json:"generation"`
		Mode       string         `json:"mode"`
		Answer     any            `json:"answer"`
		Quality    map[string]any `json:"quality"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, err
	}
	answer.RunID, answer.Generation, answer.Mode, answer.Quality = body.RunID, body.Generation, body.Mode, body.Quality
	var fields Answer
	if json.Unmarshal(mustMarshal(body.Answer), &fields) == nil {
		answer.Answer = fields
	}
	var report EvidenceReport
	if json.Unmarshal(parts.Evidence, &report) == nil && report.Status != "" && report.AnswerStatus != "" {
		answer.Evidence = &report
	}
	answer.Release = parseRelease(parts.Release)
	return answer, nil
}

func mustMarshal(value any) []byte {
	data, _ := json.Marshal(value)
	return data
}

// Release is the output release (receipt) of a published answer or refusal.
type Release struct {
	ID                  string `json:"id"`
	Kind                string `json:"kind"`
	PolicyVersion       string `json:"policy_version"` // "" on receipts from before versions: 1
	PublicationSequence int64  `json:"publication_sequence"`
	ResetContext        int    `json:"reset_context"`
	TextSHA256          string `json:"text_sha256"`
	CitationsSHA256     string `json:"citations_sha256"`
	CardsSHA256         string `json:"cards_sha256"`
	PolicySHA256        string `json:"policy_sha256"`
}

func parseRelease(raw json.RawMessage) *Release {
	var fields map[string]any
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return nil
	}
	for _, name := range []string{"id", "kind", "text_sha256", "citations_sha256", "cards_sha256", "policy_sha256"} {
		if _, ok := fields[name].(string); !ok {
			return nil
		}
	}
	var release Release
	if json.Unmarshal(raw, &release) != nil {
		return nil
	}
	return &release
}

// HashNames are the four hashes of a release, in the order Mismatches reports them.
var HashNames = []string{"text_sha256", "citations_sha256", "cards_sha256", "policy_sha256"}

// Mismatches names the hashes that do not match body, a response body's JSON as received
// (empty: it verifies), recomputed by the canonical form of the receipt's policy version.
// A version this client does not know verifies nothing: every name is returned.
func (r *Release) Mismatches(body []byte) []string {
	version := r.PolicyVersion
	if version == "" {
		version = "1"
	}
	decoded, err := decode(body)
	object, _ := decoded.(map[string]any)
	if err != nil || object == nil || (version != "1" && version != "2") {
		return append([]string(nil), HashNames...)
	}
	answer, _ := object["answer"].(map[string]any)
	evidence, _ := object["evidence"].(map[string]any)
	var wrong []string
	text, ok := answer["text"].(string)
	if !ok || digest([]byte(text)) != r.TextSHA256 {
		wrong = append(wrong, "text_sha256")
	}
	for _, part := range []struct {
		name, want string
		value      any
		present    bool
	}{
		{"citations_sha256", r.CitationsSHA256, answer["citations"], answer["citations"] != nil},
		{"cards_sha256", r.CardsSHA256, answer["cards"], answer["cards"] != nil},
		{"policy_sha256", r.PolicySHA256, evidence["policy"], evidence["policy"] != nil},
	} {
		form, err := canonical(part.value, version)
		if !part.present || err != nil || digest(form) != part.want {
			wrong = append(wrong, part.name)
		}
	}
	return wrong
}

// Verify is true when every hash of the receipt matches body (the JSON as received).
func (r *Release) Verify(body []byte) bool {
	return len(r.Mismatches(body)) == 0
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Event is one server-sent event of a run: ID is <run_id>:<generation>:<seq>; Event is
// started, step, tool, completed, failed, generation or timeout; Data the raw JSON.
type Event struct {
	ID    string
	Event string
	Data  json.RawMessage
}

// Final is true for an event that ends the stream.
func (e Event) Final() bool {
	switch e.Event {
	case "completed", "failed", "timeout", "complete", "error":
		return true
	}
	return false
}

// SearchResults are raw retrieval candidates (GET /v1/search): Label is always unverified.
type SearchResults struct {
	Label    string             `json:"label"`
	Results  []map[string]any   `json:"results"`
	Outcomes []RetrievalOutcome `json:"outcomes"`
}
