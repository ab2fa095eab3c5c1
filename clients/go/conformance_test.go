package koinon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

type vectors struct {
	JCS []struct {
		Name      string `json:"name"`
		InputJSON string `json:"input_json"`
		Canonical string `json:"canonical"`
		SHA256    string `json:"sha256"`
	} `json:"jcs"`
	Releases []struct {
		Name          string            `json:"name"`
		PolicyVersion string            `json:"policy_version"`
		BodyJSON      string            `json:"body_json"`
		Canonical     map[string]string `json:"canonical"`
		Release       map[string]string `json:"release"`
	} `json:"releases"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	data, err := os.ReadFile("../conformance/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// oneCharacterChanged returns the body JSON with one character changed in its text,
// first citation, first card or policy (decoded with numbers kept as written).
func oneCharacterChanged(t *testing.T, body []byte, part string) []byte {
	t.Helper()
	decoded, err := decode(body)
	if err != nil {
		t.Fatal(err)
	}
	object := decoded.(map[string]any)
	answer := object["answer"].(map[string]any)
	change := func(s string, with string) string { return s[:len(s)-1] + with }
	switch part {
	case "text":
		answer["text"] = change(answer["text"].(string), "!")
	case "policy":
		policy := object["evidence"].(map[string]any)["policy"].(map[string]any)
		policy["mode"] = change(policy["mode"].(string), "X")
	default:
		item := answer[part].([]any)[0].(map[string]any)
		key := "label"
		if _, ok := item["quote"]; ok {
			key = "quote"
		}
		item[key] = change(item[key].(string), "X")
	}
	changed, err := json.Marshal(object) // json.Number keeps its text
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

func TestEveryJCSVectorCanonicalizesToTheRFCsText(t *testing.T) {
	v := loadVectors(t)
	if len(v.JCS) < 28 {
		t.Fatalf("only %d JCS vectors", len(v.JCS))
	}
	for _, vector := range v.JCS {
		got, err := Canonicalize([]byte(vector.InputJSON))
		if err != nil {
			t.Fatalf("%s: %v", vector.Name, err)
		}
		sum := sha256.Sum256(got)
		if string(got) != vector.Canonical || hex.EncodeToString(sum[:]) != vector.SHA256 {
			t.Errorf("%s: %s, want %s", vector.Name, got, vector.Canonical)
		}
	}
}

func TestEveryReleaseVectorVerifiesAndOneChangedCharacterIsReportedByName(t *testing.T) {
	v := loadVectors(t)
	versions, cards := map[string]bool{}, 0
	for _, vector := range v.Releases {
		versions[vector.PolicyVersion] = true
		body := []byte(vector.BodyJSON)
		answer, err := ParseAnswer(body)
		if err != nil || answer.Release == nil {
			t.Fatalf("%s: %v", vector.Name, err)
		}
		if answer.Release.PolicyVersion != vector.PolicyVersion || !answer.Verified() {
			t.Errorf("%s: does not verify: %v", vector.Name, answer.Release.Mismatches(body))
		}
		var parts struct {
			Answer   map[string]json.RawMessage `json:"answer"`
			Evidence map[string]json.RawMessage `json:"evidence"`
		}
		_ = json.Unmarshal(body, &parts)
		form := CanonicalV1
		if vector.PolicyVersion == "2" {
			form = Canonicalize
		}
		for name, raw := range map[string]json.RawMessage{
			"citations": parts.Answer["citations"], "cards": parts.Answer["cards"], "policy": parts.Evidence["policy"],
		} {
			if got, _ := form(raw); string(got) != vector.Canonical[name] {
				t.Errorf("%s %s: %s, want %s", vector.Name, name, got, vector.Canonical[name])
			}
		}
		changes := []string{"text", "policy"}
		if len(answer.Answer.Citations) > 0 {
			changes = append(changes, "citations")
		}
		if len(answer.Answer.Cards) > 0 {
			changes = append(changes, "cards")
			cards++
		}
		for _, part := range changes {
			got := answer.Release.Mismatches(oneCharacterChanged(t, body, part))
			if !reflect.DeepEqual(got, []string{part + "_sha256"}) {
				t.Errorf("%s, %s changed: %v", vector.Name, part, got)
			}
		}
	}
	if !versions["1"] || !versions["2"] || cards < 6 {
		t.Fatalf("the vectors lack a version or cards: %v, %d", versions, cards)
	}
}

func TestAReceiptWithoutAVersionIsVersion1AndAnUnknownOneVerifiesNothing(t *testing.T) {
	v := loadVectors(t)
	for _, vector := range v.Releases {
		if vector.PolicyVersion != "1" {
			continue
		}
		body := []byte(strings.Replace(vector.BodyJSON, `"policy_version": "1", `, "", 1))
		answer, _ := ParseAnswer(body)
		if answer.Release.PolicyVersion != "" || !answer.Verified() {
			t.Errorf("%s: a receipt without a version does not verify as version 1", vector.Name)
		}
		answer.Release.PolicyVersion = "3"
		if got := answer.Release.Mismatches(body); !reflect.DeepEqual(got, HashNames) {
			t.Errorf("%s: an unknown version verifies: %v", vector.Name, got)
		}
	}
}

func TestAnOmittedEvidenceReportStaysNilNeverSuccess(t *testing.T) {
	for _, evidence := range []string{``, `, "evidence": null`, `, "evidence": "available"`, `, "evidence": []`,
		`, "evidence": {"answer_status": null}`, `, "evidence": {"status": "available"}`} {
		body := `{"run_id": "r", "answer": {"text": "Trust me.", "citations": [], "cards": []}` + evidence + `}`
		answer, err := ParseAnswer([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if answer.Evidence != nil || answer.EvidenceBacked() || answer.Release != nil || answer.Verified() {
			t.Errorf("%s: read as %+v", body, answer.Evidence)
		}
	}
	answer, _ := ParseAnswer([]byte(`{"run_id": "r", "answer": {"text": "x"}, "release": {"id": "x"}}`))
	if answer.Release != nil {
		t.Error("a release without its hashes")
	}
}

func TestNumbersAreWrittenAsECMAScriptWritesThem(t *testing.T) {
	for value, want := range map[float64]string{
		1.5e-7: "1.5e-7", 2000: "2000", 2.52365e16: "25236500000000000", 1e21: "1e+21", 0.000001: "0.000001",
		-0.5: "-0.5", 123456789012345680000: "123456789012345680000", 5e-324: "5e-324",
	} {
		if got := FormatNumber(value); got != want {
			t.Errorf("FormatNumber(%v) = %s, want %s", value, got, want)
		}
	}
	if _, err := Canonicalize([]byte(`[1e400]`)); err == nil {
		t.Error("a number beyond doubles canonicalized")
	}
	if _, err := Canonicalize([]byte(`[1] 2`)); err == nil {
		t.Error("text after the value was accepted")
	}
}
