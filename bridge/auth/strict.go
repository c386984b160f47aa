package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxTokenBytes caps a bearer token: 64 KiB. A longer one is refused before
// any decoding. The speech principal's own token names every patient it
// follows (P-18), so the cap bounds how many one server can follow: about
// 1,500 patients with 36-character ids, 5,000 with short ones (8 KiB, the
// cap before, held fewer than 150 UUIDs: past it the speech principal
// could not connect and every turn said the notes could not be reached).
const MaxTokenBytes = 64 << 10

// checkRaw applies the rules golang-jwt leaves open (P-13), on the raw
// JWS before it is parsed:
//
//   - the header and the payload are each one JSON object in which no member
//     name appears twice, at any depth (RFC 7515 §5.2 and RFC 7519 §4 let a
//     parser refuse duplicates; last-wins would let a signed token mean two
//     things);
//   - the header has no "crit" member: Unsay understands no JWS extension,
//     so a token that requires one is refused (RFC 7515 §4.1.11);
//   - "exp", "nbf" and "iat", when present, are JSON numbers (RFC 7519 §2
//     NumericDate); golang-jwt reads a numeric string such as "9999999999" too.
func checkRaw(token string) error {
	if len(token) > MaxTokenBytes {
		return fmt.Errorf("token is over %d bytes", MaxTokenBytes)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("token is not a compact JWS of three segments")
	}
	header, err := decodeSegment(parts[0])
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	payload, err := decodeSegment(parts[1])
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	h, err := uniqueObject(header)
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if _, ok := h["crit"]; ok {
		return errors.New(`header names a "crit" extension this server does not understand`)
	}
	p, err := uniqueObject(payload)
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		raw, ok := p[name]
		if !ok {
			continue
		}
		if raw = bytes.TrimSpace(raw); len(raw) == 0 || !(raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9')) {
			return fmt.Errorf("%q is not a JSON number", name)
		}
	}
	return nil
}

func decodeSegment(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64url: %w", err)
	}
	return b, nil
}

// uniqueObject decodes one JSON object into its members (raw values),
// failing on a duplicate member name at any depth, trailing data, or
// anything but an object.
func uniqueObject(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := checkValue(dec, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// maxDepth bounds nesting in a token's JSON.
const maxDepth = 32

func checkValue(dec *json.Decoder, depth int) error {
	if depth > maxDepth {
		return errors.New("JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if depth == 0 {
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return errors.New("not a JSON object")
		}
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("not JSON: %w", err)
			}
			k, _ := kt.(string)
			if seen[k] {
				return fmt.Errorf("member %q appears twice", k)
			}
			seen[k] = true
			if err := checkValue(dec, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := checkValue(dec, depth+1); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return fmt.Errorf("not JSON: %w", err)
	}
	return nil
}
