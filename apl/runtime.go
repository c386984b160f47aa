package apl

import (
	"encoding/json"
	"strconv"
	"strings"
)

// MinRuntime is the oldest APL runtime the documents can be made to render
// on: they need document-level handleTick (the 5 s tick that keeps a card
// on screen current, APL 1.4) and mainTemplate parameters named after their
// datasource (APL 1.3). An older runtime gets the voice-only answer: a card
// that cannot tick could show a withdrawn instruction as current (P-24).
const MinRuntime = "1.4"

// frameBackgroundSince is the APL version whose Frame has `background`
// (a color or a gradient); older runtimes know only `backgroundColor`,
// which apl-suggester reports deprecated from 2023.3.
const frameBackgroundSince = "2023.3"

// ParseVersion reads an APL version ("1.6", "2023.3", "2024.3") as a
// comparable pair. Date versions (2022.1 on) compare above every 1.x.
func ParseVersion(v string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(v), ".")
	if !found {
		b = "0"
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(a)
	minor, err2 = strconv.Atoi(b)
	if err1 != nil || err2 != nil || major < 1 || minor < 0 {
		return 0, 0, false
	}
	return major, minor, true
}

// compareVersions returns -1, 0 or 1; both must parse.
func compareVersions(a, b string) int {
	am, an, _ := ParseVersion(a)
	bm, bn, _ := ParseVersion(b)
	switch {
	case am != bm:
		return sign(am - bm)
	default:
		return sign(an - bn)
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// Renderable reports whether a device whose
// supportedInterfaces["Alexa.Presentation.APL"].runtime.maxVersion is
// maxVersion can be sent a card: at least MinRuntime. An empty or
// unreadable maxVersion (a hand-written request; Alexa always sends it) is
// taken as MinRuntime, and so renderable.
func Renderable(maxVersion string) bool {
	if _, _, ok := ParseVersion(maxVersion); !ok {
		return true
	}
	return compareVersions(maxVersion, MinRuntime) >= 0
}

// ForRuntime returns doc (one of the embedded documents, version Version)
// as the device's APL runtime can render it, and false when it cannot
// (older than MinRuntime: send no directive, only speech):
//
//   - maxVersion ≥ the document's version: doc unchanged;
//   - older: the document declares maxVersion instead, and below 2023.3
//     every Frame's `background` becomes `backgroundColor`.
//
// An empty or unreadable maxVersion is treated as MinRuntime. doc that is
// not an APL document is returned unchanged.
func ForRuntime(doc json.RawMessage, maxVersion string) (json.RawMessage, bool) {
	if !Renderable(maxVersion) {
		return nil, false
	}
	target := strings.TrimSpace(maxVersion)
	if _, _, ok := ParseVersion(target); !ok {
		target = MinRuntime
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil || m["type"] != "APL" {
		return doc, true
	}
	declared, _ := m["version"].(string)
	if _, _, ok := ParseVersion(declared); !ok || compareVersions(target, declared) >= 0 {
		return doc, true
	}
	m["version"] = target
	if compareVersions(target, frameBackgroundSince) < 0 {
		renameFrameBackground(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return doc, true // cannot happen: it was just decoded
	}
	return out, true
}

// renameFrameBackground turns every Frame's color `background` into
// `backgroundColor`, in place.
func renameFrameBackground(v any) {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "Frame" {
			if bg, ok := x["background"].(string); ok {
				delete(x, "background")
				x["backgroundColor"] = bg
			}
		}
		for _, c := range x {
			renameFrameBackground(c)
		}
	case []any:
		for _, c := range x {
			renameFrameBackground(c)
		}
	}
}
