package koinon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of a JSON text:
// what a release of policy version 2 hashes (docs/releases.md). Keys are sorted by UTF-16
// code units, strings escape only '"', '\\' and control characters, numbers are written as
// ECMAScript writes IEEE 754 doubles.
func Canonicalize(raw []byte) ([]byte, error) {
	value, err := decode(raw)
	if err != nil {
		return nil, err
	}
	return canonical(value, "2")
}

// CanonicalV1 returns release policy version 1's form of a JSON text: the server's Python
// json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) — keys sorted by
// code point, each number exactly as written in raw.
func CanonicalV1(raw []byte) ([]byte, error) {
	value, err := decode(raw)
	if err != nil {
		return nil, err
	}
	return canonical(value, "1")
}

// decode reads one JSON value, keeping every number's text (json.Number).
func decode(raw []byte) (any, error) {
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return nil, err
	}
	if _, err := decoder.Token(); err == nil {
		return nil, errors.New("koinon: unexpected text after the JSON value")
	}
	return value, nil
}

// canonical writes a decoded value (UseNumber) in the form of a release policy version.
func canonical(value any, version string) ([]byte, error) {
	if version != "1" && version != "2" {
		return nil, fmt.Errorf("koinon: unknown release policy version %q", version)
	}
	var out bytes.Buffer
	if err := write(&out, value, version == "2"); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func write(out *bytes.Buffer, value any, jcs bool) error {
	switch v := value.(type) {
	case nil:
		out.WriteString("null")
	case bool:
		out.WriteString(strconv.FormatBool(v))
	case string:
		writeString(out, v)
	case json.Number:
		if !jcs {
			out.WriteString(v.String()) // version 1: as Python wrote it
			return nil
		}
		f, err := strconv.ParseFloat(v.String(), 64)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("koinon: %s is no IEEE 754 double", v)
		}
		out.WriteString(FormatNumber(f))
	case []any:
		out.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := write(out, item, jcs); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for key := range v {
			keys = append(keys, key)
		}
		if jcs {
			sort.Slice(keys, func(i, j int) bool { return lessUTF16(keys[i], keys[j]) })
		} else {
			sort.Strings(keys) // UTF-8 byte order is code point order
		}
		out.WriteByte('{')
		for i, key := range keys {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, key)
			out.WriteByte(':')
			if err := write(out, v[key], jcs); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	default:
		return fmt.Errorf("koinon: %T is not a decoded JSON value", value)
	}
	return nil
}

func lessUTF16(a, b string) bool {
	left, right := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(left) && i < len(right); i++ {
		if left[i] != right[i] {
			return left[i] < right[i]
		}
	}
	return len(left) < len(right)
}

// writeString escapes as ECMAScript's JSON.stringify (and Python's json with
// ensure_ascii=False) do: '"', '\\', the short forms \b \t \n \f \r, other control
// characters as \u00xx; everything else as itself.
func writeString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\t':
			out.WriteString(`\t`)
		case '\n':
			out.WriteString(`\n`)
		case '\f':
			out.WriteString(`\f`)
		case '\r':
			out.WriteString(`\r`)
		default:
			if r < 0x20 {
				fmt.Fprintf(out, `\u%04x`, r)
			} else {
				out.WriteRune(r)
			}
		}
	}
	out.WriteByte('"')
}

// FormatNumber writes a finite double as ECMAScript's Number::toString does (RFC 8785
// §3.2.2.3): the shortest digits that round-trip, plain from 1e-6 up to 1e21, else with
// an exponent (1e+21, 1.5e-7); -0 as 0.
func FormatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	if f < 0 {
		return "-" + FormatNumber(-f)
	}
	text := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx, shortest digits
	mantissa, exponent, _ := strings.Cut(text, "e")
	digits := strings.Replace(mantissa, ".", "", 1)
	power, _ := strconv.Atoi(exponent)
	k, n := len(digits), power+1 // value = 0.DIGITS × 10^n
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	sign := "+"
	if n-1 < 0 {
		sign = "-"
	}
	exp := strconv.Itoa(abs(n - 1))
	if k == 1 {
		return digits + "e" + sign + exp
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + exp
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
