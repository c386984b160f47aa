package skill

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// ending says how a response that asks nothing ends.
type ending int

const (
	endAnswer ending = iota // true on a voice-only device; omitted with a screen
	endLeave                // true: the user is leaving
	endScreen               // omitted: keep the screen session, no microphone
)

type cardKind int

const (
	cardNone cardKind = iota
	cardCare
	cardHelp
	cardLink
)

// reply is what a handler wants said after the announcements.
type reply struct {
	segs     []segment
	rest     []segment // said with "more" after segs (Repeat of a cut answer)
	question string    // closing question: shouldEndSession false + reprompt
	reprompt string
	end      ending
	card     cardKind
	empty    bool // nothing to say: {"version":"1.0","response":{}}
	forget   bool // drop the session's Repeat/More state
}

func emptyResponse() ResponseEnvelope { return ResponseEnvelope{Version: "1.0"} }

func boolPtr(b bool) *bool { return &b }

func hasText(segs []segment) bool {
	for _, s := range segs {
		if strings.TrimSpace(s.Text) != "" {
			return true
		}
	}
	return false
}

// build turns a reply into the response: prefix, announcements and answer
// in that order — every announcement that fits whole before one that must
// be cut (ahead) — cut to MaxSSMLChars at a sentence or word boundary with
// the rest kept for "more", the three-state shouldEndSession, the APL card
// when the device has a screen, the marks of everything it speaks in full
// (a segment cut for "more" is marked only with its last part) and of every
// fact its care card shows whole, and the offers of every announcement it
// speaks any part of and of every row its care card shows cut.
func (s *Skill) build(t *turn, r reply) handled {
	h := handled{out: emptyResponse(), marks: append([]mark(nil), t.silent...), patient: t.patient, release: noop,
		heardBefore: t.snap.Heard, from: map[models.URI]int{}}
	for u, a := range t.announced {
		if a.Heard != nil {
			h.from[u] = a.Heard.N
		} else {
			h.from[u] = 0
		}
	}
	if r.empty && len(t.anns) == 0 && len(t.prefix) == 0 {
		return h
	}
	closing := r.question
	if len(r.rest) > 0 {
		closing = MoreCue // more follows in any case
	}
	// resume: the rest of a cut answer said after anything else is
	// introduced again (U5); limitClips (clip.go): Alexa's audio limits.
	all := resume(limitClips(ahead(t.prefix, t.anns, r.segs, closing, MaxSSMLChars)))
	spoken, rest := fitSpeech(all, closing, MaxSSMLChars)
	rest = append(rest, r.rest...)
	body := &h.out.Response
	switch {
	case len(rest) > 0:
		body.OutputSpeech = ssmlSpeech(renderSSML(spoken, MoreCue))
		body.Reprompt = &Reprompt{OutputSpeech: *ssmlSpeech(renderSSML(nil, textMoreReprompt))}
		body.ShouldEndSession = boolPtr(false)
	case r.question != "":
		body.OutputSpeech = ssmlSpeech(renderSSML(spoken, r.question))
		rp := r.reprompt
		if rp == "" {
			rp = r.question
		}
		body.Reprompt = &Reprompt{OutputSpeech: *ssmlSpeech(renderSSML(nil, rp))}
		body.ShouldEndSession = boolPtr(false)
	default:
		if hasText(spoken) {
			body.OutputSpeech = ssmlSpeech(renderSSML(spoken, ""))
		}
		switch {
		case r.end == endLeave:
			body.ShouldEndSession = boolPtr(true)
		case r.end == endAnswer && !t.apl:
			body.ShouldEndSession = boolPtr(true)
		}
	}
	unasked := t.env != nil && t.unasked()
	for _, sg := range spoken {
		for _, m := range sg.Marks {
			// What the card's tick speaks unasked is offered (below), never
			// heard: the room may be empty, so his next turn says it again,
			// saying it may not have been told properly (U10, P-24).
			if !unasked || m.Told {
				h.marks = append(h.marks, m)
			}
		}
		// A part of an announcement that carries any of its version's words
		// is an offer of that version: he may have heard them, and a later
		// revision withdraws them (P-24). A part of a retraction that says
		// only the words it withdraws offers nothing — he heard those
		// already, and the ledger keeps them as what he was told. Only the
		// whole, or its last part, is heard.
		if sg.Ann != 0 && sg.Fact != (models.URI{}) && sg.carriesVersion() {
			h.offered = append(h.offered, models.Offer{ID: sg.Ann, URI: sg.Fact, Version: sg.Version})
		}
	}
	if t.apl && r.end != endLeave {
		if d, shown := t.card(r.card, spoken); d != nil {
			body.Directives = []Directive{*d}
			switch d.Token {
			case apl.TokenCare:
				whole, cut := t.cardMarks()
				h.marks = append(h.marks, whole...)
				h.cardOffered = append(h.cardOffered, cut...)
			case apl.TokenRetraction:
				// The retraction card shows the new words whichever part
				// is spoken: an offer of them, once the card is sent.
				o := models.Offer{ID: shown.ID, URI: shown.URI(), Version: shown.Current.N}
				if !slices.Contains(h.offered, o) {
					h.cardOffered = append(h.cardOffered, o)
				}
			}
		}
	}
	if sid := t.env.SessionID(); sid != "" && t.patient != "" {
		if r.forget {
			s.sessions.delete(sid)
		} else if hasText(spoken) || r.question != "" {
			last, kept := spoken, rest
			if unasked {
				// What a tick speaks is flagged (and what it held back kept
				// with it), so later ticks of the session hold it back.
				last = append(append([]segment(nil), t.heldSegs...), flagUnasked(spoken)...)
				kept = flagUnasked(rest)
			}
			s.sessions.put(sid, sessionState{patient: t.patient, last: last, rest: kept, question: r.question, reprompt: r.reprompt,
				changes: t.changes(spoken)}, t.now)
		} else if t.held {
			// A tick that held back what an earlier tick spoke keeps the
			// session's record of it: later ticks hold it back too.
			s.sessions.put(sid, t.session, t.now)
		}
	}
	return h
}

// flagUnasked returns a copy of segs, each flagged as spoken by a tick.
func flagUnasked(segs []segment) []segment {
	out := make([]segment, len(segs))
	for i, sg := range segs {
		sg.unasked = true
		out[i] = sg
	}
	return out
}

func ssmlSpeech(ssml string) *OutputSpeech { return &OutputSpeech{Type: "SSML", SSML: ssml} }

// safeResponse is said instead of a response that failed checkResponse: a
// fixed sentence, well-formed by construction, that marks nothing.
func safeResponse() ResponseEnvelope {
	out := emptyResponse()
	out.Response.OutputSpeech = ssmlSpeech(renderSSML(say(textSorry), ""))
	out.Response.ShouldEndSession = boolPtr(true)
	return out
}

// checkResponse reports whether out's outputSpeech and reprompt SSML are
// well-formed (checkSSML). An ill-formed response is never sent (P-24).
func checkResponse(out ResponseEnvelope) error {
	if os := out.Response.OutputSpeech; os != nil && os.SSML != "" {
		if err := checkSSML(os.SSML); err != nil {
			return fmt.Errorf("outputSpeech: %w", err)
		}
	}
	if rp := out.Response.Reprompt; rp != nil && rp.OutputSpeech.SSML != "" {
		if err := checkSSML(rp.OutputSpeech.SSML); err != nil {
			return fmt.Errorf("reprompt: %w", err)
		}
	}
	return nil
}

// encodeResponse marshals out; over MaxResponseBytes it drops the APL
// directives and tries again. directives says whether they were kept.
func encodeResponse(out ResponseEnvelope) (b []byte, directives bool, err error) {
	b, err = json.Marshal(out)
	if err != nil {
		return nil, false, err
	}
	if len(b) <= MaxResponseBytes {
		return b, true, nil
	}
	out.Response.Directives = nil
	b, err = json.Marshal(out)
	if err != nil {
		return nil, false, err
	}
	if len(b) > MaxResponseBytes {
		return nil, false, fmt.Errorf("response of %d bytes over %d", len(b), MaxResponseBytes)
	}
	return b, false, nil
}

// sentCareCard reports whether directives hold the care card.
func sentCareCard(directives []Directive) bool {
	for _, d := range directives {
		if d.Type == RenderDocumentType && d.Token == apl.TokenCare {
			return true
		}
	}
	return false
}

// withoutCardMarks drops the marks of care-card rows: the card was not sent.
func withoutCardMarks(marks []mark) []mark {
	out := marks[:0:0]
	for _, m := range marks {
		if !m.Card {
			out = append(out, m)
		}
	}
	return out
}
