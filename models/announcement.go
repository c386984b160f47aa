package models

import (
	"slices"
	"time"
)

// Announcement is something the patient must hear before anything else on
// his next turn: a fact that changed since the version he last heard, or
// one he has never heard (P-19). It holds record fields only; the sentence
// is rendered at speak time with Render.
type Announcement struct {
	ID      int64    // the queue's id, stable across restarts
	Patient string   // patient id
	Heard   *Version // the version the patient last heard; nil if never
	Current Version  // the latest version, read over MCP as care.read.user
	// Again: it was put in a response before whose delivery was never
	// confirmed (a failed write, a crash before the heard ledger's commit),
	// so it is spoken again saying so (P-24).
	Again bool
	// HeardUnsure: Heard is the version he may have heard — offered in a
	// response whose delivery was never confirmed — not one he heard for
	// certain, so the retraction quotes it as "I may have told you: …",
	// never as words he was told (P-24).
	HeardUnsure bool
	// Told is, when Heard is only a version he may have heard
	// (HeardUnsure), the older version he heard for certain, set when its
	// words differ from both Heard's and Current's: the retraction then
	// withdraws both — "I told you: “…” I may also have told you: “…”" —
	// so the words he was told are never left standing (P-19, P-24). Nil
	// otherwise.
	Told *Version
	// MayAlso are the other versions he may have heard — offered in
	// responses whose delivery was never confirmed, besides Heard — each
	// with words unlike those of Heard, Told, Current and one another,
	// oldest first: the retraction withdraws them too, as words he may
	// have been told (P-19, P-24; finding F10: after two unconfirmed
	// deliveries in a row the first is withdrawn as well as the second).
	// Nil when there are none.
	MayAlso []Version
	// ChangedBy is, for a retraction, the version that first said
	// Current's words: the oldest of the versions after Heard that say
	// them (SaysTheSameAs), when it is older than Current — the later ones
	// only renewed the words (a new review date, author or priority). The
	// retraction names its author and age as who changed it and when
	// (Changer; breakit8 G6). Nil: Current.
	ChangedBy *Version
	// Earlier: versions he may have heard older than those quoted were
	// left unquoted — more than MaxMayHaveQuoted, or not readable back —
	// so the retraction says it withdraws earlier versions too.
	Earlier bool
}

// MaxMayHaveQuoted bounds how many wordings a retraction quotes as ones
// he may have heard (Heard when HeardUnsure, and MayAlso): more would make
// it too long to follow. The newest are quoted — always including Heard,
// the newest such — and the rest withdrawn as "earlier versions"; what he
// heard for certain is always quoted (P-19, P-24).
const MaxMayHaveQuoted = 3

// Withdrawal is what a retraction withdraws, as it is said and shown:
// the words he heard for certain (Told; nil when it withdraws none), then
// those he may have heard (MayHave, oldest first, at most
// MaxMayHaveQuoted), and whether earlier versions he may have heard are
// withdrawn unquoted (Earlier). Shorten, when set, shortens each quote
// of the withdrawn words as it is said (see Shortener; nil: quoted whole).
type Withdrawal struct {
	Told    *Version
	MayHave []Version
	Earlier bool
	Shorten Shortener
}

// Shortener returns the head of a withdrawn value to quote in its place
// and whether it is shorter than the value (cut): a voice caps each quote
// of withdrawn words so that the new words come early however long the
// old ones were (finding T9, P-24); the sentence then says the quote was
// shortened (ShortenedQuote). The head is what the listener hears of that
// version's words; it is never empty when cut.
type Shortener func(value string) (head string, cut bool)

// Withdrawn is what a's retraction withdraws (a.Heard must be set): Heard
// as told — with MayAlso as words he may have heard — or, when
// HeardUnsure, Told as told and Heard with MayAlso as words he may have
// heard; only the newest MaxMayHaveQuoted of those are quoted, the rest
// said as earlier versions (Earlier). The words he heard for certain are
// never left out.
func (a Announcement) Withdrawn() Withdrawal {
	w := Withdrawal{Told: a.Heard, Earlier: a.Earlier}
	may := slices.Clone(a.MayAlso)
	if a.HeardUnsure {
		w.Told = a.Told
		if a.Heard != nil {
			may = append(may, *a.Heard)
		}
	}
	slices.SortStableFunc(may, func(x, y Version) int { return x.N - y.N })
	if n := len(may) - MaxMayHaveQuoted; n > 0 {
		may, w.Earlier = may[n:], true
	}
	if len(may) > 0 {
		w.MayHave = may
	}
	return w
}

// Offer is something put in a response about to be written to Alexa
// (P-24): an announcement (its queue id, its fact — an unversioned
// care:// URI — and the version of the fact the response speaks), or, with
// Told, a version of a fact the response tells plainly (an answer, the
// launch, a row of the Echo Show's care card; ID is then 0). Until the
// delivery is confirmed Ray may have heard that version, and a later
// revision withdraws it.
type Offer struct {
	ID      int64
	URI     URI
	Version int
	Told    bool
}

// Marked is what one response to Alexa marked of one fact (P-24): the
// version it spoke or showed (Version ≥ 1), the version he had heard for
// certain before (HeardBefore, 0 for none) and, for an announcement, the
// version its retraction withdrew (From; 0 for a first hearing; for a fact
// told plainly it is HeardBefore). The skill keeps it in the response's
// session attributes; when Alexa reports that it did not play the
// response (SessionEndedRequest, reason ERROR), the care source re-opens
// it: heard goes back to HeardBefore — unless a later delivery moved it —
// Version becomes offered and the announcement is owed again.
//
// With Confirmed it is a plain telling of the version he had heard for
// certain (Version = HeardBefore's version; HeardBefore and From 0): a
// later delivery that may have confirmed it against the report of an
// earlier first hearing (finding B1) — never against a retraction's, which
// it did not deliver (LedgerMark.Withdrew; finding U2). Reported not
// played, that confirmation is undone:
// a rollback an earlier report was refused is done then, otherwise the
// version may be re-opened again by such a report.
//
// Response identifies the response that made the mark (the skill's
// AttrResponse: 1–64 characters of ValidID's set, random per response;
// "" for marks kept by a build that wrote none). Alexa may deliver one
// response's report twice (a retry, a late resend): a report of a
// response whose report was applied already re-opens nothing, so it never
// undoes a delivery confirmed after the first (finding F14). Without a
// Response every report is applied as it comes, erring toward a repeat.
type Marked struct {
	URI         URI // unversioned
	HeardBefore int
	From        int
	Version     int
	Confirmed   bool
	Response    string
}

// URI is the unversioned URI of the announced fact.
func (a Announcement) URI() URI { return a.Current.FactURI() }

// Render returns the sentence to speak at now: RenderRetraction(heard,
// current) when he heard an older version — withdrawing a.Withdrawn():
// the words he heard for certain first, then those he may have heard
// ("I told you: “…” I may also have told you: “…”, “…” and “…”, and
// earlier versions.") — RenderFirstHearing otherwise,
// each judging Current's review date at now (P-24). With Again it opens
// "Stop — as I may not have told you properly: …" (a first hearing: "As I
// may not have told you properly: your …"). It returns ErrUnchanged when
// the words he heard did not change (nothing to say), and
// ErrAssistantAudience for an assistant-only version.
func (a Announcement) Render(now time.Time) (string, error) { return a.RenderShortened(now, nil) }

// RenderShortened is Render with each quote of withdrawn words shortened
// by shorten (Withdrawal.Shorten; nil: Render): how the voice says it.
// The new words are never shortened.
func (a Announcement) RenderShortened(now time.Time, shorten Shortener) (string, error) {
	if a.Heard != nil {
		w := a.Withdrawn()
		w.Shorten = shorten
		return renderRetraction(*a.Heard, a.Current, a.Changer(), now, a.Again, w)
	}
	s, err := RenderFirstHearing(a.Current, now)
	if err != nil || !a.Again {
		return s, err
	}
	return capitalize(RedeliveryPhrase) + ": " + lowerFirst(s), nil
}

// Changer is the version a retraction names as the change — its author and
// age: ChangedBy when set, else Current.
func (a Announcement) Changer() Version {
	if a.ChangedBy != nil {
		return *a.ChangedBy
	}
	return a.Current
}

// IsRetraction reports whether speaking a withdraws something he heard.
func (a Announcement) IsRetraction() bool { return a.Heard != nil }

// Snapshot is what may be said to a patient on one turn (P-24): his
// speakable facts and the announcements he is owed, each confirmed to be
// the fact's current version with the care store when the snapshot was
// taken, and each version's staleness as the server judged it then.
type Snapshot struct {
	// Facts are the patient's current speakable facts, sorted by URI.
	Facts []Version
	// Pending are the announcements he is owed, every retraction before
	// any first hearing, each group oldest first (P-17, P-19).
	Pending []Announcement
	// Heard is, per fact (unversioned URI), the version he heard for
	// certain according to the heard ledger when the snapshot was taken; a
	// fact he never heard is absent. The skill keeps it with what a
	// response marks (Marked.HeardBefore), so Alexa's report that the
	// response was not played can re-open it.
	Heard map[URI]int
	// Withdrawn is set only alongside an error, when the snapshot could not
	// be confirmed: the facts whose version he heard is known, from the
	// durable heard ledger, to be superseded. Their new words are not
	// given — they could not be confirmed current.
	Withdrawn []URI
}

func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}
