package models

import (
	"sync"
	"time"
)

// GlossMemoTexts is how many texts a GlossMemo holds at most. A care
// plan's speakable notes number in the tens per patient; past the bound
// one remembered text is forgotten for each new one.
const GlossMemoTexts = 1024

// GlossMemo remembers GlossSentence's answer for each text it was asked
// about. GlossSentence is a pure function of the text, and a note's words
// never change once written (P-5), so a skill that speaks the same few
// notes on every turn works each text out once, not once per turn: the
// glossary's patterns cost 2–35 µs a note, about a fifth of a verified
// Launch's CPU before this (issue 17). Its answers are GlossSentence's,
// always (TestGlossMemo_AnswersAsGlossSentenceDoes). Safe for concurrent
// use; the zero value is ready; a nil *GlossMemo works every text out.
type GlossMemo struct {
	mu   sync.RWMutex
	memo map[string]string // text → GlossSentence(text)
}

// Sentence returns GlossSentence(text), from memory when text was asked
// before.
func (m *GlossMemo) Sentence(text string) string {
	if m == nil {
		return GlossSentence(text)
	}
	m.mu.RLock()
	g, ok := m.memo[text]
	m.mu.RUnlock()
	if ok {
		return g
	}
	g = GlossSentence(text)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.memo == nil {
		m.memo = make(map[string]string)
	}
	if len(m.memo) >= GlossMemoTexts {
		for k := range m.memo { // forget one, any one
			delete(m.memo, k)
			break
		}
	}
	m.memo[text] = g
	return g
}

// RenderFact is models.RenderFact with the gloss taken from m.
func (m *GlossMemo) RenderFact(v Version, now time.Time) (string, error) {
	return renderFact(v, now, m.Sentence)
}
