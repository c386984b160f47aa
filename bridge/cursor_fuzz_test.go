package bridge

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzCursor: the list cursor (P-11). Any key round-trips through
// encodeCursor/decodeCursor. Whatever string a client sends, decodeCursor
// does not panic, and accepts it only when it carries this server's MAC
// over the key it names: a cursor made under another server's key, or
// altered in its key or its tag, is refused.
func FuzzCursor(f *testing.F) {
	s := &Server{cursorKey: bytes.Repeat([]byte{7}, 32)}
	other := &Server{cursorKey: bytes.Repeat([]byte{8}, 32)}
	for _, k := range []string{"care://ray/weight_bearing", "care-internal://ray/risk", "ui://unsay/echo", "", "é\x00/"} {
		f.Add(k, s.encodeCursor(k))
		f.Add(k, other.encodeCursor(k))
	}
	f.Add("care://ray/contact", "c1.")
	f.Add("care://ray/contact", "c1..")
	f.Add("care://ray/contact", "c1.Y2FyZTovL3JheS9jb250YWN0.AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("care://ray/contact", "c2.Y2FyZTovL3JheS9jb250YWN0.x")
	f.Add("", "not a cursor")
	f.Fuzz(func(t *testing.T, key, c string) {
		if got, ok := s.decodeCursor(s.encodeCursor(key)); !ok || got != key {
			t.Fatalf("cursor for %q decodes as %q, %v", key, got, ok)
		}
		if _, ok := s.decodeCursor(other.encodeCursor(key)); ok {
			t.Fatalf("a cursor made under another server's key was accepted (key %q)", key)
		}
		got, ok := s.decodeCursor(c)
		if !ok {
			return
		}
		rest, _ := strings.CutPrefix(c, cursorPrefix)
		_, tag, _ := strings.Cut(rest, ".")
		mac, err := base64.RawURLEncoding.DecodeString(tag)
		if !strings.HasPrefix(c, cursorPrefix) || err != nil || !hmac.Equal(mac, s.cursorMAC(got)) {
			t.Fatalf("decodeCursor(%q) accepted key %q without this server's MAC", c, got)
		}
		if again, ok := s.decodeCursor(s.encodeCursor(got)); !ok || again != got {
			t.Fatalf("the accepted key %q does not round-trip", got)
		}
	})
}
