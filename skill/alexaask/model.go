// Package alexaask talks to a running Unsay's /alexa from a terminal, as
// virtual-alexa does in the whole-program tests: it turns an utterance into
// an Alexa request with the skill package's own interaction model (the
// intent whose sample matches, its slots with entity resolutions from the
// slot type's values and synonyms), builds the envelope an Echo Show sends,
// posts it (unsigned for a development server with --alexa-verify=false, or
// signed by a test CA from skill/alexatest), and turns the answer back into
// what Ray would hear and what the card shows.
//
// It is the engine of `unsay ask`. Like skill/, it never imports store/ or
// bridge/ (P-18): it knows Unsay only through /alexa.
package alexaask

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Model is the language model of one locale's interaction model
// (interactionModels/custom/<locale>.json): the invocation name, the
// intents with their sample utterances and slots, and the custom slot types.
type Model struct {
	Invocation string
	Intents    []Intent
	Types      map[string][]TypeValue // slot type name → values
}

// Intent is one intent of the model.
type Intent struct {
	Name    string
	Slots   []SlotDef
	Samples []string
}

// SlotDef is one slot of an intent: its name and slot type.
type SlotDef struct {
	Name string
	Type string
}

// TypeValue is one value of a custom slot type: its id (the resolution
// id, e.g. weight_bearing), its name and synonyms.
type TypeValue struct {
	ID       string
	Name     string
	Synonyms []string
}

// ErrModel: the interaction model JSON is not shaped as ASK expects.
var ErrModel = errors.New("alexaask: malformed interaction model")

// ParseModel reads an interaction model (the ASK JSON with
// interactionModel.languageModel). Errors wrap ErrModel.
func ParseModel(raw []byte) (*Model, error) {
	var doc struct {
		InteractionModel struct {
			LanguageModel struct {
				InvocationName string `json:"invocationName"`
				Intents        []struct {
					Name  string `json:"name"`
					Slots []struct {
						Name string `json:"name"`
						Type string `json:"type"`
					} `json:"slots"`
					Samples []string `json:"samples"`
				} `json:"intents"`
				Types []struct {
					Name   string `json:"name"`
					Values []struct {
						ID   string `json:"id"`
						Name struct {
							Value    string   `json:"value"`
							Synonyms []string `json:"synonyms"`
						} `json:"name"`
					} `json:"values"`
				} `json:"types"`
			} `json:"languageModel"`
		} `json:"interactionModel"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	lm := doc.InteractionModel.LanguageModel
	if lm.InvocationName == "" || len(lm.Intents) == 0 {
		return nil, fmt.Errorf("%w: no invocationName or no intents", ErrModel)
	}
	m := &Model{Invocation: normalize(lm.InvocationName), Types: map[string][]TypeValue{}}
	for _, in := range lm.Intents {
		it := Intent{Name: in.Name, Samples: in.Samples}
		for _, s := range in.Slots {
			it.Slots = append(it.Slots, SlotDef{Name: s.Name, Type: s.Type})
		}
		m.Intents = append(m.Intents, it)
	}
	for _, t := range lm.Types {
		for _, v := range t.Values {
			m.Types[t.Name] = append(m.Types[t.Name], TypeValue{ID: v.ID, Name: v.Name.Value, Synonyms: v.Name.Synonyms})
		}
	}
	return m, nil
}

// builtInSamples are utterances for the AMAZON built-in intents, which a
// model lists without samples (Alexa knows them); only intents the model
// declares are matched.
var builtInSamples = map[string][]string{
	"AMAZON.HelpIntent":         {"help", "help me", "what can i say", "what can i ask", "what can i do", "how does this work"},
	"AMAZON.StopIntent":         {"stop", "off", "quit", "exit", "goodbye", "bye", "shut up"},
	"AMAZON.CancelIntent":       {"cancel", "never mind", "forget it"},
	"AMAZON.NavigateHomeIntent": {"go home", "home"},
	"AMAZON.RepeatIntent":       {"repeat", "repeat that", "say that again", "say it again", "what did you say", "pardon", "come again"},
}

// FallbackIntent is what an utterance that matches no sample resolves to
// (when the model declares it).
const FallbackIntent = "AMAZON.FallbackIntent"

// Match is how the model understood an utterance.
type Match struct {
	// Launch: the utterance only opened the skill ("open care notes", or
	// nothing): a LaunchRequest.
	Launch bool
	// Intent is the matched intent's name (IntentRequest) when not Launch.
	Intent string
	// Sample is the sample utterance that matched ("" for a launch or the
	// fallback).
	Sample string
	// Slots holds every slot of the intent, filled or not.
	Slots map[string]SlotValue
}

// SlotValue is one slot of a matched intent.
type SlotValue struct {
	Name  string
	Type  string
	Value string // the words heard, "" when the sample did not fill it
	// ResolvedID and ResolvedName are the custom type value the words
	// matched (by name or synonym); empty when none did (ER_SUCCESS_NO_MATCH).
	ResolvedID, ResolvedName string
}

// launchWords open the skill by its invocation name: "open care notes",
// "ask care notes what changed", "tell care notes my code is …".
var launchWords = []string{"open", "start", "launch", "ask", "tell", "talk to", "use"}

// Understand matches utterance against the model: a launch phrase alone
// (or an empty utterance) is a launch; "ask care notes <words>" is the intent
// of <words>; otherwise the best sample wins — the one with the most literal
// words, then the one whose custom slots all resolve. A sample that is only
// slots ("{topic}") matches only when its slots resolve. Nothing matching is
// the fallback intent.
func (m *Model) Understand(utterance string) Match {
	u := normalize(utterance)
	u = strings.TrimSpace(strings.TrimPrefix(u+" ", "alexa "))
	for _, w := range launchWords {
		if rest, ok := strings.CutPrefix(u+" ", w+" "+m.Invocation+" "); ok {
			u = strings.TrimSpace(rest)
			for _, joiner := range []string{"to ", "for ", "and ", "if ", "whether "} {
				if r, ok := strings.CutPrefix(u, joiner); ok {
					u = r
					break
				}
			}
			if u == "" {
				return Match{Launch: true}
			}
			break
		}
	}
	if u == "" || u == m.Invocation {
		return Match{Launch: true}
	}
	type cand struct {
		m        Match
		literals int
		resolved bool
	}
	var best *cand
	for _, in := range m.Intents {
		samples := in.Samples
		if len(samples) == 0 {
			samples = builtInSamples[in.Name]
		}
		for _, s := range samples {
			vals, literals, ok := m.matchSample(in, s, u)
			if !ok {
				continue
			}
			resolved := true
			for _, v := range vals {
				if v.Value != "" && len(m.Types[v.Type]) > 0 && v.ResolvedID == "" {
					resolved = false
				}
			}
			if literals == 0 && !resolved {
				continue
			}
			c := cand{m: Match{Intent: in.Name, Sample: s, Slots: vals}, literals: literals, resolved: resolved}
			if best == nil || c.resolved && !best.resolved || c.resolved == best.resolved && c.literals > best.literals {
				best = &c
			}
		}
	}
	if best != nil {
		return best.m
	}
	for _, in := range m.Intents {
		if in.Name == FallbackIntent {
			return Match{Intent: FallbackIntent, Slots: map[string]SlotValue{}}
		}
	}
	return Match{Launch: true}
}

var slotRE = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// matchSample matches the normalized utterance u against one sample and
// returns the intent's slots (filled from the sample's) and the number of
// literal words in the sample.
func (m *Model) matchSample(in Intent, sample, u string) (map[string]SlotValue, int, bool) {
	var pattern strings.Builder
	pattern.WriteString("^")
	var order []string
	literals := 0
	for i, tok := range strings.Fields(sample) {
		if i > 0 {
			pattern.WriteString(" ")
		}
		if sm := slotRE.FindStringSubmatch(tok); sm != nil && sm[0] == tok {
			order = append(order, sm[1])
			pattern.WriteString("(.+?)")
			continue
		}
		literals++
		pattern.WriteString(regexp.QuoteMeta(normalize(tok)))
	}
	pattern.WriteString("$")
	re, err := regexp.Compile(pattern.String())
	if err != nil {
		return nil, 0, false
	}
	sub := re.FindStringSubmatch(u)
	if sub == nil {
		return nil, 0, false
	}
	vals := make(map[string]SlotValue, len(in.Slots))
	types := map[string]string{}
	for _, s := range in.Slots {
		types[s.Name] = s.Type
		vals[s.Name] = SlotValue{Name: s.Name, Type: s.Type}
	}
	for i, name := range order {
		typ, ok := types[name]
		if !ok {
			return nil, 0, false // a sample naming an undeclared slot
		}
		v := SlotValue{Name: name, Type: typ, Value: sub[i+1]}
		switch {
		case typ == "AMAZON.NUMBER":
			n, ok := spokenNumber(v.Value)
			if !ok {
				return nil, 0, false
			}
			v.Value = n
		case len(m.Types[typ]) > 0:
			v.ResolvedID, v.ResolvedName = m.resolve(typ, v.Value)
		}
		vals[name] = v
	}
	return vals, literals, true
}

// resolve finds the custom type value whose name or a synonym is words.
func (m *Model) resolve(typ, words string) (id, name string) {
	w := normalize(words)
	for _, v := range m.Types[typ] {
		if normalize(v.Name) == w {
			return v.ID, v.Name
		}
		for _, s := range v.Synonyms {
			if normalize(s) == w {
				return v.ID, v.Name
			}
		}
	}
	return "", ""
}

var digitWords = map[string]string{
	"zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4",
	"five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}

// spokenNumber turns "427193", "4 2 7 1 9 3" or "four two seven one nine
// three" into digits, as Alexa fills an AMAZON.NUMBER slot.
func spokenNumber(s string) (string, bool) {
	var b strings.Builder
	for _, w := range strings.Fields(s) {
		if d, ok := digitWords[w]; ok {
			b.WriteString(d)
			continue
		}
		for _, r := range w {
			if r < '0' || r > '9' {
				return "", false
			}
		}
		b.WriteString(w)
	}
	return b.String(), b.Len() > 0
}

// normalize lowercases s, keeps letters, digits and apostrophes (curly ones
// made straight), and collapses everything else to single spaces.
func normalize(s string) string {
	s = strings.NewReplacer("’", "'", "‘", "'").Replace(strings.ToLower(s))
	var b strings.Builder
	space := true
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'':
			b.WriteRune(r)
			space = false
		case r == '{' || r == '}' || r == '_':
			b.WriteRune(r) // slot markers survive in samples
			space = false
		default:
			if !space {
				b.WriteByte(' ')
				space = true
			}
		}
	}
	return strings.TrimSpace(b.String())
}

// IntentNames lists the model's intents, sorted.
func (m *Model) IntentNames() []string {
	out := make([]string, 0, len(m.Intents))
	for _, in := range m.Intents {
		out = append(out, in.Name)
	}
	sort.Strings(out)
	return out
}
