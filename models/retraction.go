package models

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Errors returned by RenderRetraction.
var (
	// ErrAssistantAudience: an assistant-only version can never be spoken (P-1, P-17).
	ErrAssistantAudience = errors.New("assistant-audience version cannot be rendered for speech")
	// ErrUnchanged: the current version repeats the words that were heard; nothing to withdraw.
	ErrUnchanged = errors.New("the words did not change")
	// ErrDifferentFact: heard and current are not versions of the same fact.
	ErrDifferentFact = errors.New("versions belong to different facts")
)

// RenderRetraction builds the sentence that withdraws what the patient heard
// (P-17), only from record fields:
//
//  1. stop first: "Stop — your {topic} instruction has changed."
//  2. the withdrawn sentence: "I told you: “{heard.Value}”"
//  3. the new one: "{current.AuthorLabel} changed it {age}: “{current.Value}”"
//  4. glosses from a closed glossary that restate and never advise (see Glosses).
//
// heard is the version the patient actually heard (P-19), not necessarily
// current.N-1. It returns ErrAssistantAudience if either version is
// assistant-only, ErrDifferentFact if they name different facts, and
// ErrUnchanged when the words are the same (after trimming space).
func RenderRetraction(heard, current Version, now time.Time) (string, error) {
	if heard.Audience != AudienceUser || current.Audience != AudienceUser {
		return "", ErrAssistantAudience
	}
	if heard.Patient != current.Patient || heard.Domain != current.Domain {
		return "", ErrDifferentFact
	}
	if strings.TrimSpace(heard.Value) == strings.TrimSpace(current.Value) {
		return "", ErrUnchanged
	}
	parts := []string{
		fmt.Sprintf("Stop — your %s instruction has changed.", Topic(current.Domain)),
		fmt.Sprintf("I told you: %s", Quote(heard.Value)),
		fmt.Sprintf("%s changed it %s: %s", Appositive(current.AuthorLabel), SpokenAge(now.Sub(current.WrittenAt)), Quote(current.Value)),
	}
	if g := GlossSentence(current.Value); g != "" {
		parts = append(parts, g)
	}
	return strings.Join(parts, " "), nil
}

// Appositive closes a label that carries its own comma ("Sarah Okafor,
// physio") so it reads as a subject: "Sarah Okafor, physio, changed it".
func Appositive(label string) string {
	if strings.Contains(label, ",") {
		return label + ","
	}
	return label
}

// RenderFirstHearing is what the patient hears of a fact he never heard
// before (a creation, or his first time): no "I told you" (P-19).
// "Your {topic} instruction from {author label}, {age}: “{value}”".
// It returns ErrAssistantAudience for an assistant-only version.
func RenderFirstHearing(v Version, now time.Time) (string, error) {
	if v.Audience != AudienceUser {
		return "", ErrAssistantAudience
	}
	s := fmt.Sprintf("Your %s instruction from %s, %s: %s", Topic(v.Domain), v.AuthorLabel, SpokenAge(now.Sub(v.WrittenAt)), Quote(v.Value))
	if g := GlossSentence(v.Value); g != "" {
		s += " " + g
	}
	return s, nil
}

// Quote wraps a clinician's words in curly quotes, ending them with a full
// stop when they carry no closing punctuation: “Full weight-bearing.”
func Quote(value string) string {
	v := strings.TrimSpace(value)
	if v != "" && !strings.ContainsAny(v[len(v)-1:], ".!?") {
		v += "."
	}
	return "“" + v + "”"
}

// GlossEntry is one term of the closed glossary and its plain restatement.
type GlossEntry struct {
	Term          string // the clinician's term, lower case
	Gloss         string // what it means, in plain words; never advice
	WeightBearing bool   // a weight-bearing level: stricter rules apply
	match         *regexp.Regexp
}

func entry(term, gloss string, wb bool, alternates ...string) GlossEntry {
	alts := append([]string{term}, alternates...)
	for i, a := range alts {
		alts[i] = regexp.QuoteMeta(a)
	}
	return GlossEntry{Term: term, Gloss: gloss, WeightBearing: wb,
		match: regexp.MustCompile(`(?i)\b(?:` + strings.Join(alts, "|") + `)\b`)}
}

// glossary is closed: five entries, each restating the clinician's words.
var glossary = []GlossEntry{
	entry("full weight-bearing as tolerated", "as much weight as is comfortable", true),
	entry("partial weight-bearing", "only some of your weight", true),
	entry("non-weight-bearing", "no weight at all", true, "no weight through"),
	entry("hip flexion", "bending at the hip", false),
	entry("rivaroxaban", "the blood-thinning tablet", false),
}

var (
	qualifierRE = regexp.MustCompile(`(?i)\b(?:not|never|avoid|until|unless|except|instead|rather than|no longer)\b|n['’]t\b`)
	actionRE    = regexp.MustCompile(`(?i)\b(?:stop|hold|wait|before|after|cancel|withdraw|suspend|pause|revoke|reverse|delay)\b`)
	// levelREs name the distinct weight-bearing levels; two in one text make it ambiguous.
	levelREs = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bfull weight[- ]bearing\b`),
		regexp.MustCompile(`(?i)\bpartial weight[- ]bearing\b`),
		regexp.MustCompile(`(?i)\bnon[- ]weight[- ]bearing\b|\bno weight through\b`),
		regexp.MustCompile(`(?i)\btoe[- ]touch weight[- ]bearing\b`),
	}
)

// Glosses returns the glossary entries that apply to text, in glossary
// order. It fails safe, returning none, when the text carries a qualifier
// (not, never, avoid, until, unless, except, instead, rather than, no longer,
// n't) or names more than one weight-bearing level; a weight-bearing entry
// applies only when the text starts with its term and has no action word.
func Glosses(text string) []GlossEntry {
	if qualifierRE.MatchString(text) {
		return nil
	}
	levels := 0
	for _, re := range levelREs {
		if re.MatchString(text) {
			levels++
		}
	}
	if levels > 1 {
		return nil
	}
	trimmed := strings.TrimSpace(text)
	var out []GlossEntry
	for _, g := range glossary {
		loc := g.match.FindStringIndex(trimmed)
		if loc == nil {
			continue
		}
		if g.WeightBearing && (loc[0] != 0 || actionRE.MatchString(text)) {
			continue
		}
		out = append(out, g)
	}
	return out
}

// GlossSentence renders Glosses(text) as one sentence —
// "In plain terms, hip flexion means bending at the hip." — or "" when none apply.
func GlossSentence(text string) string {
	gs := Glosses(text)
	if len(gs) == 0 {
		return ""
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.Term + " means " + g.Gloss
	}
	return "In plain terms, " + strings.Join(parts, ", and ") + "."
}
