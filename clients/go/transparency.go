package koinon

// Verifying koinon's answer log outside the server, trusting only the log's public key
// (docs/releases.md, "The answer log"): C2SP signed notes with Ed25519 keys (the
// checkpoint's signature), the C2SP tlog-checkpoint body (origin, size, root hash,
// extension lines), and RFC 9162 §2.1 hashing with its inclusion and consistency proof
// verification. The same checks as the Python client's koinon_client.transparency, written
// anew on the standard library (crypto/sha256, crypto/ed25519).

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// HashSize is the size of every hash of the log (SHA-256).
const HashSize = 32

const (
	algEd25519      = 1
	signaturePrefix = "— "
)

var decimal = regexp.MustCompile(`^(?:0|[1-9][0-9]*)$`)

// ErrLogUnverified is the kind of every Error the log checks return: the answer log does not
// vouch for what was checked. Its Code says why: malformed (a note, key or proof of another
// shape), forged (a checkpoint the trusted key did not sign, or of another log),
// proof_invalid (the entry is not in the signed tree), inconsistent (two checkpoints of
// forked trees), receipt (the body does not match its receipt), no_checkpoint.
var ErrLogUnverified = kind("the answer log does not vouch for it")

func logError(code, message string) *Error {
	return &Error{Code: code, Message: message, Fields: map[string]string{}, kind: ErrLogUnverified}
}

// EntryFromReceipt and EntryFromLog are the fields of a log entry (the server's
// audit.log.log_entry): a client rebuilds the entry from the receipt and takes from the
// served entry only those a receipt lacks.
var (
	EntryFromReceipt = []string{"release", "run", "kind", "reset_context", "publication_sequence",
		"policy_version", "text_sha256", "citations_sha256", "cards_sha256", "policy_sha256"}
	EntryFromLog = []string{"generation", "source_refs", "sealed_at"}
)

// decodeBase64 reads standard padded base64 in its one canonical spelling.
func decodeBase64(text string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(text)
	if err != nil || base64.StdEncoding.EncodeToString(data) != text {
		return nil, logError("malformed", "not canonical base64")
	}
	return data, nil
}

// Verifier is a trusted Ed25519 note key: <name>+<hex key id>+<base64(0x01 ‖ public key)>.
type Verifier struct {
	Name      string
	KeyID     []byte
	PublicKey ed25519.PublicKey
}

// ParseVerifier reads a published verifier key; the key id must be the key's.
func ParseVerifier(vkey string) (*Verifier, error) {
	name, rest, _ := strings.Cut(strings.TrimSpace(vkey), "+")
	hexID, encoded, _ := strings.Cut(rest, "+")
	data, err := decodeBase64(encoded)
	if err != nil {
		return nil, err
	}
	claimed, err := hex.DecodeString(hexID)
	if err != nil {
		return nil, logError("malformed", "a key id is hex")
	}
	if name == "" || strings.IndexFunc(name, unicode.IsSpace) >= 0 || len(claimed) != 4 ||
		len(data) != 1+ed25519.PublicKeySize || data[0] != algEd25519 {
		return nil, logError("malformed", "not an Ed25519 verifier key")
	}
	verifier := &Verifier{Name: name, KeyID: claimed, PublicKey: ed25519.PublicKey(data[1:])}
	if !bytes.Equal(keyID(name, verifier.PublicKey), claimed) {
		return nil, logError("malformed", "the key id does not match the key")
	}
	return verifier, nil
}

func keyID(name string, public ed25519.PublicKey) []byte {
	sum := sha256.Sum256(append(append([]byte(name+"\n"), algEd25519), public...))
	return sum[:4]
}

// KeyString is the verifier key as published.
func (v *Verifier) KeyString() string {
	encoded := base64.StdEncoding.EncodeToString(append([]byte{algEd25519}, v.PublicKey...))
	return v.Name + "+" + hex.EncodeToString(v.KeyID) + "+" + encoded
}

// Verifies reports whether signature is the key's over message.
func (v *Verifier) Verifies(message, signature []byte) bool {
	return ed25519.Verify(v.PublicKey, message, signature)
}

// Checkpoint is a checkpoint the trusted key signed: the log's tree of Size entries has
// Root. Extensions are the body's further lines (koinon writes "timestamp <unix seconds>");
// Note is the signed note as received, to keep (a witness keeps these).
type Checkpoint struct {
	Origin     string
	Size       int64
	Root       []byte
	Extensions []string
	Note       string
}

// Timestamp is the "timestamp <unix seconds>" extension, when the log wrote one.
func (c *Checkpoint) Timestamp() (int64, bool) {
	for _, line := range c.Extensions {
		name, value, _ := strings.Cut(line, " ")
		if name == "timestamp" && decimal.MatchString(value) {
			seconds, err := strconv.ParseInt(value, 10, 64)
			return seconds, err == nil
		}
	}
	return 0, false
}

// OpenCheckpoint returns the checkpoint of a signed note when the trusted key (a verifier
// key string) signed it and it is that log's (its origin is the key's name); an Error of
// kind ErrLogUnverified otherwise.
func OpenCheckpoint(note, verifierKey string) (*Checkpoint, error) {
	verifier, err := ParseVerifier(verifierKey)
	if err != nil {
		return nil, err
	}
	return verifier.Open(note)
}

// Open is OpenCheckpoint with a parsed verifier.
func (v *Verifier) Open(note string) (*Checkpoint, error) {
	for _, r := range note {
		if r < 0x20 && r != '\n' {
			return nil, logError("malformed", "a note has no control characters")
		}
	}
	split := strings.LastIndex(note, "\n\n")
	if split < 0 || !strings.HasSuffix(note, "\n") {
		return nil, logError("malformed", "not a signed note")
	}
	text, block := note[:split+1], note[split+2:len(note)-1]
	signed := false
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, signaturePrefix) {
			return nil, logError("malformed", "not a signature line")
		}
		name, encoded, _ := strings.Cut(strings.TrimPrefix(line, signaturePrefix), " ")
		blob, err := decodeBase64(encoded)
		if err != nil {
			return nil, err
		}
		if name != v.Name || len(blob) < 4 || !bytes.Equal(blob[:4], v.KeyID) {
			continue // another key's (a witness's cosignature): not trusted here
		}
		if !v.Verifies([]byte(text), blob[4:]) {
			return nil, logError("forged", "the log key's signature does not verify")
		}
		signed = true
	}
	if !signed {
		return nil, logError("forged", "the trusted key did not sign this checkpoint")
	}
	lines := strings.Split(text[:len(text)-1], "\n")
	if len(lines) < 3 || !decimal.MatchString(lines[1]) {
		return nil, logError("malformed", "not a checkpoint: origin, size, root hash")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return nil, logError("malformed", "a tree size beyond 64 bits")
	}
	root, err := decodeBase64(lines[2])
	if err != nil {
		return nil, err
	}
	if len(root) != HashSize {
		return nil, logError("malformed", "a root hash has 32 bytes")
	}
	if lines[0] != v.Name {
		return nil, logError("forged", fmt.Sprintf("a checkpoint of %q, not of this log", lines[0]))
	}
	return &Checkpoint{Origin: lines[0], Size: size, Root: root, Extensions: lines[3:], Note: note}, nil
}

// RFC 9162 §2.1: leaf SHA-256(0x00 ‖ entry), node SHA-256(0x01 ‖ left ‖ right).

// LeafHash is the hash of a log entry's bytes as a leaf of the tree.
func LeafHash(entry []byte) []byte {
	sum := sha256.Sum256(append([]byte{0}, entry...))
	return sum[:]
}

func nodeHash(left, right []byte) []byte {
	sum := sha256.Sum256(append(append([]byte{1}, left...), right...))
	return sum[:]
}

func wellFormed(hashes ...[]byte) bool {
	for _, h := range hashes {
		if len(h) != HashSize {
			return false
		}
	}
	return true
}

// VerifyInclusion checks (RFC 9162 §2.1.3.2) that leaf is at index in the tree of treeSize
// whose head is root; an Error of kind ErrLogUnverified (proof_invalid) otherwise.
func VerifyInclusion(leaf []byte, index, treeSize int64, proof [][]byte, root []byte) error {
	if !wellFormed(append([][]byte{leaf, root}, proof...)...) || index < 0 || index >= treeSize {
		return logError("proof_invalid", "the inclusion proof is malformed")
	}
	fn, sn, r := index, treeSize-1, leaf
	for _, p := range proof {
		if sn == 0 {
			return logError("proof_invalid", "the inclusion proof is too long")
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = nodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || subtle.ConstantTimeCompare(r, root) != 1 {
		return logError("proof_invalid", "the entry is not in the signed tree (its proof leads elsewhere)")
	}
	return nil
}

// VerifyConsistency checks (RFC 9162 §2.1.4.2) that the tree of newSize with head newRoot
// extends the tree of oldSize with head oldRoot; an Error of kind ErrLogUnverified
// (inconsistent) otherwise.
func VerifyConsistency(oldSize, newSize int64, oldRoot, newRoot []byte, proof [][]byte) error {
	fork := logError("inconsistent", "the newer checkpoint does not extend the older one (a fork)")
	if !wellFormed(append([][]byte{oldRoot, newRoot}, proof...)...) || oldSize <= 0 || oldSize > newSize {
		return fork
	}
	if oldSize == newSize {
		if len(proof) > 0 || subtle.ConstantTimeCompare(oldRoot, newRoot) != 1 {
			return fork
		}
		return nil
	}
	if len(proof) == 0 {
		return fork
	}
	path := append([][]byte(nil), proof...)
	if oldSize&(oldSize-1) == 0 {
		path = append([][]byte{oldRoot}, path...)
	}
	fn, sn := oldSize-1, newSize-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return fork
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = nodeHash(c, fr), nodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = nodeHash(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || subtle.ConstantTimeCompare(fr, oldRoot) != 1 || subtle.ConstantTimeCompare(sr, newRoot) != 1 {
		return fork
	}
	return nil
}

// ProofHashes decodes a served proof (base64 hashes).
func ProofHashes(proof []string) ([][]byte, error) {
	hashes := make([][]byte, 0, len(proof))
	for _, text := range proof {
		h, err := decodeBase64(text)
		if err != nil {
			return nil, err
		}
		hashes = append(hashes, h)
	}
	return hashes, nil
}

// LogEntry returns the canonical JSON (RFC 8785) of the log entry of a body's receipt, as
// the server builds it: the receipt's identifying fields and hashes, and of the served
// entry only what a receipt does not carry (the generation's id, the source references,
// the sealing time), all bound by the leaf. body and servedEntry are JSON texts.
func LogEntry(body, servedEntry []byte) ([]byte, error) {
	decodedBody, err := decode(body)
	object, _ := decodedBody.(map[string]any)
	if err != nil || object == nil {
		return nil, logError("malformed", "the body is not a JSON object")
	}
	served, err := decode(servedEntry)
	fromLog, _ := served.(map[string]any)
	if err != nil || fromLog == nil {
		return nil, logError("malformed", "the served entry is not a JSON object")
	}
	release, _ := object["release"].(map[string]any)
	entry := map[string]any{"release": release["id"], "run": object["run_id"]}
	for _, name := range EntryFromReceipt {
		if name != "run" && name != "release" {
			entry[name] = release[name]
		}
	}
	for _, name := range EntryFromLog {
		value, ok := fromLog[name]
		if !ok {
			return nil, logError("malformed", "the served entry has no "+name)
		}
		entry[name] = value
	}
	return canonical(entry, "2")
}

// InclusionOptions are the trust of Release.VerifyInclusion: the log's public key,
// obtained out of band, and optionally a checkpoint you kept (its signed note); without
// one, the latest checkpoint the server offers.
type InclusionOptions struct {
	VerifierKey string
	Checkpoint  string
}

// VerifyInclusion checks that this receipt is in koinon's answer log, trusting only the
// log's public key: body (the JSON as received) must match the receipt (Verify); the log
// entry is rebuilt from the receipt as the server builds it (LogEntry, leaf SHA-256(0x00 ‖
// entry)); the inclusion proof from GET /v1/releases/<id>/proof must lead to the root of a
// checkpoint that key signed. It returns that checkpoint; an Error of kind ErrLogUnverified
// (or the server's, e.g. ErrNotFound with code not_integrated) otherwise.
func (r *Release) VerifyInclusion(ctx context.Context, c *Client, body []byte, options InclusionOptions) (*Checkpoint, error) {
	var parts struct {
		Release json.RawMessage `json:"release"`
	}
	if json.Unmarshal(body, &parts) != nil || len(r.Mismatches(body)) > 0 {
		return nil, logError("receipt", "the body does not match this receipt")
	}
	if parsed := parseRelease(parts.Release); parsed == nil || *parsed != *r {
		return nil, logError("receipt", "the body does not match this receipt")
	}
	verifier, err := ParseVerifier(options.VerifierKey)
	if err != nil {
		return nil, err
	}
	var trusted *Checkpoint
	query := url.Values{}
	if options.Checkpoint != "" {
		if trusted, err = verifier.Open(options.Checkpoint); err != nil {
			return nil, err
		}
		query.Set("tree_size", strconv.FormatInt(trusted.Size, 10))
	}
	raw, err := c.json(ctx, http.MethodGet, "/v1/releases/"+url.PathEscape(r.ID)+"/proof", query, nil)
	if err != nil {
		return nil, err
	}
	var served struct {
		Index      *int64   `json:"index"`
		TreeSize   *int64   `json:"tree_size"`
		Entry      *string  `json:"entry"`
		Proof      []string `json:"proof"`
		Checkpoint *string  `json:"checkpoint"`
	}
	if json.Unmarshal(raw, &served) != nil {
		return nil, logError("malformed", "the served proof is not of its shape")
	}
	if trusted == nil {
		if served.Checkpoint == nil || *served.Checkpoint == "" {
			return nil, logError("no_checkpoint", "no signed checkpoint covers this release yet")
		}
		if trusted, err = verifier.Open(*served.Checkpoint); err != nil {
			return nil, err
		}
	}
	if served.TreeSize == nil || *served.TreeSize != trusted.Size || served.Index == nil {
		return nil, logError("proof_invalid", "the proof is for another tree")
	}
	if served.Entry == nil {
		return nil, logError("malformed", "the served entry is not JSON")
	}
	entry, err := LogEntry(body, []byte(*served.Entry))
	if err != nil {
		return nil, err
	}
	proof, err := ProofHashes(served.Proof)
	if err != nil {
		return nil, err
	}
	if err := VerifyInclusion(LeafHash(entry), *served.Index, trusted.Size, proof, trusted.Root); err != nil {
		return nil, err
	}
	var logged struct {
		Log *struct {
			Index *int64 `json:"index"`
		} `json:"log"`
	}
	if json.Unmarshal(parts.Release, &logged) == nil && logged.Log != nil &&
		(logged.Log.Index == nil || *logged.Log.Index != *served.Index) {
		return nil, logError("proof_invalid", "the receipt names another log index")
	}
	return trusted, nil
}

// LogCheckpoint is GET /v1/log/checkpoint: the latest checkpoint, verified with
// verifierKey (never with the key the server sends along).
func (c *Client) LogCheckpoint(ctx context.Context, verifierKey string) (*Checkpoint, error) {
	raw, err := c.json(ctx, http.MethodGet, "/v1/log/checkpoint", nil, nil)
	if err != nil {
		return nil, err
	}
	var body struct {
		Note string `json:"note"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, logError("malformed", "the served checkpoint is not of its shape")
	}
	return OpenCheckpoint(body.Note, verifierKey)
}

// VerifyConsistency checks that the log of newNote extends the log of oldNote, both signed
// notes the key signed (RFC 9162 §2.1.4, the proof from GET /v1/log/consistency): nothing
// the old one covered was rewritten, removed or reordered. It returns the new checkpoint;
// an Error of kind ErrLogUnverified (inconsistent) for a fork. Keep the checkpoints you
// verify (their Note): a later one must extend them.
func (c *Client) VerifyConsistency(ctx context.Context, oldNote, newNote, verifierKey string) (*Checkpoint, error) {
	verifier, err := ParseVerifier(verifierKey)
	if err != nil {
		return nil, err
	}
	old, err := verifier.Open(oldNote)
	if err != nil {
		return nil, err
	}
	latest, err := verifier.Open(newNote)
	if err != nil {
		return nil, err
	}
	if old.Size > latest.Size {
		return nil, logError("inconsistent", "the newer checkpoint is smaller")
	}
	if old.Size == 0 {
		return latest, nil // every tree extends the empty one
	}
	var proof [][]byte
	if old.Size < latest.Size {
		query := url.Values{"from": {strconv.FormatInt(old.Size, 10)}, "to": {strconv.FormatInt(latest.Size, 10)}}
		raw, err := c.json(ctx, http.MethodGet, "/v1/log/consistency", query, nil)
		if err != nil {
			return nil, err
		}
		var served struct {
			Proof []string `json:"proof"`
		}
		if json.Unmarshal(raw, &served) != nil {
			return nil, logError("malformed", "a proof is a list of base64 hashes")
		}
		if proof, err = ProofHashes(served.Proof); err != nil {
			return nil, err
		}
	}
	if err := VerifyConsistency(old.Size, latest.Size, old.Root, latest.Root, proof); err != nil {
		return nil, err
	}
	return latest, nil
}
