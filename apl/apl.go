// Package apl holds Unsay's Alexa Presentation Language documents for the
// Echo Show (APL 2024.3, embedded JSON) and the Go builders of their
// datasources. It does no I/O and imports no other Unsay package.
//
// Three documents, each with the RenderDocument token that names it:
//
//	care        TokenCare        the care card: one row per speakable fact (the
//	                             fact, who wrote it, how long ago) in the order
//	                             the skill speaks them (walking first), stale
//	                             rows marked "past its review date" in amber, a
//	                             "What changed?" button (SendEvent ["whats_changed"])
//	                             and a document tick that sends SendEvent ["tick"]
//	                             every 5,000 ms while it is displayed
//	retraction  TokenRetraction  the withdrawn sentence struck through in grey,
//	                             the new one in white on black, "who · when";
//	                             the same tick and button
//	help        TokenHelp        what Ray can ask
//
// Layouts scale for hubLandscapeSmall (Echo Show 5, 960×480 dp),
// hubLandscapeMedium (Echo Show 8, 960×600 dp), hubLandscapeLarge (Echo Show
// 10, 1280×800 dp) and hubLandscapeXLarge (Echo Show 15, 1920×1080 dp) through
// viewport-size `when` conditions on the dimension resources, so the documents
// need no imported package and render offline.
//
// Every string a builder puts in a datasource is escaped for APL text markup
// (&, <, >), because APL Text interprets a small HTML-like markup.
//
// The documents are written for APL 2024.3 and lint clean under Amazon's
// apl-suggester (test/js/apl-lint.mjs). ForRuntime fits one to a device's
// runtime.maxVersion: an older runtime (down to MinRuntime, 1.4) gets a
// document declaring its own version, with Frame backgroundColor below
// 2023.3; anything older gets no card.
package apl

import (
	"embed"
	"encoding/json"
	"fmt"
	"strings"
)

// Version is the APL document version every document declares.
const Version = "2024.3"

// Tokens name the document a RenderDocument directive draws; an
// Alexa.Presentation.APL.UserEvent carries the token of the document that sent it.
const (
	TokenCare       = "unsay-care-card"
	TokenRetraction = "unsay-retraction-card"
	TokenHelp       = "unsay-help-card"
)

// Names of the documents, as used for skill-package/response/display/<name>/document.json.
const (
	NameCare       = "care"
	NameRetraction = "retraction"
	NameHelp       = "help"
)

// Tick and button event arguments the documents send with SendEvent.
const (
	ArgTick         = "tick"
	ArgWhatsChanged = "whats_changed"
	// ArgPlayClip: the care card's play button (CareCard.ClipButton).
	ArgPlayClip = "play_clip"
	// TickMillis is the care and retraction cards' tick period in milliseconds.
	TickMillis = 5000
)

//go:embed documents/*.json
var documents embed.FS

// Doc is one APL document: its name, the token a RenderDocument carries for it,
// the datasource key its mainTemplate parameter binds, and its JSON.
type Doc struct {
	Name      string
	Token     string
	Parameter string
	JSON      json.RawMessage
}

func load(name, token, param string) Doc {
	b, err := documents.ReadFile("documents/" + name + ".json")
	if err != nil {
		// The files are embedded at build time; a missing one is a build defect.
		panic(fmt.Sprintf("apl: embedded document %s: %v", name, err))
	}
	return Doc{Name: name, Token: token, Parameter: param, JSON: json.RawMessage(b)}
}

// Care returns the care card document.
func Care() Doc { return load(NameCare, TokenCare, "care") }

// Retraction returns the retraction card document.
func Retraction() Doc { return load(NameRetraction, TokenRetraction, "retraction") }

// Help returns the help card document.
func Help() Doc { return load(NameHelp, TokenHelp, "help") }

// All returns every document, in a fixed order (care, retraction, help).
func All() []Doc { return []Doc{Care(), Retraction(), Help()} }

// EscapeText escapes s for an APL Text component, whose text is parsed as
// markup: & < > become entities, so a clinician's words show as written.
func EscapeText(s string) string { return textEscaper.Replace(s) }

// textEscaper is immutable and safe for concurrent use.
var textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// MaxCardTextRunes caps how much of one fact a card shows (runes), so a
// card of many long facts stays well inside Alexa's 120 KB response. A
// longer text is shown cut: it ends with "…" and the card says so under it
// (CareRow.CutNote, RetractionCard.CutNote) — a card never drops words
// silently. The spoken answer is never cut by this; the skill does not
// count a cut row as told by the card (Cut), only as offered: he may have
// read its beginning, so a revision withdraws it.
const MaxCardTextRunes = 600

// Cut reports whether a card shows s shortened (more than MaxCardTextRunes
// runes once trimmed): its end is not on the screen.
func Cut(s string) bool {
	return len([]rune(strings.TrimSpace(s))) > MaxCardTextRunes
}

func clip(s string) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= MaxCardTextRunes {
		return string(r)
	}
	return strings.TrimSpace(string(r[:MaxCardTextRunes-1])) + "…"
}
