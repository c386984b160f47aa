package apl

import (
	"cmp"
	"slices"
	"strings"
)

// CareRow is one speakable fact on the care card. All fields are plain text;
// CareDatasource escapes them.
type CareRow struct {
	Topic  string // "Walking"
	Text   string // the clinician's words, as written
	Author string // "Sarah Okafor, physio"
	Age    string // "two days ago"
	Stale  bool   // past its review date (P-7, judged when drawn): drawn in amber, the age first
	// Lead marks the fact the skill speaks first at launch (the walking
	// instruction); Priority is the fact's 0…1 hint. Both only order rows.
	Lead     bool
	Priority float64
	// CutNote is drawn under Text when the card shows it cut (Cut): how to
	// hear all of it ("Shortened here. Say: tell me about my blood
	// thinner, to hear all of it."). Ignored for a text shown whole.
	CutNote string
}

// CareCard is the content of the care card.
type CareCard struct {
	Title string // "Your care notes"
	Rows  []CareRow
	// ClipButton labels the card's play button ("Play the exercise count");
	// "" draws none. Set only when the skill can play a clip now (an
	// https URL Alexa fetches); pressing it sends SendEvent [ArgPlayClip].
	ClipButton string
}

// StaleNote is the marker a stale row carries on the care card; it says what
// to do, as the speech does.
const StaleNote = "Past its review date. Please check it with your care team."

// SpeakingOrder returns rows (a copy) in the order the skill speaks facts
// at launch: the lead fact first, then facts past their review date (in
// the order given, as launch speaks them), then the rest by priority,
// highest first; ties keep their given order.
func SpeakingOrder(rows []CareRow) []CareRow {
	out := slices.Clone(rows)
	rank := func(r CareRow) int {
		switch {
		case r.Lead:
			return 0
		case r.Stale:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(out, func(a, b CareRow) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 || rank(a) < 2 {
			return c // stale facts are spoken in the order given
		}
		return cmp.Compare(b.Priority, a.Priority)
	})
	return out
}

// WhatsChangedLabel is the text of the cards' "What changed?" button.
const WhatsChangedLabel = "What changed?"

type careRowData struct {
	Topic     string `json:"topic"`
	Text      string `json:"text"`
	Byline    string `json:"byline"`
	Stale     bool   `json:"stale"`
	StaleNote string `json:"staleNote"`
	Cut       bool   `json:"cut"`
	CutNote   string `json:"cutNote"`
}

type careData struct {
	Title      string        `json:"title"`
	Rows       []careRowData `json:"rows"`
	ButtonText string        `json:"buttonText"`
	ClipButton string        `json:"clipButton"`
}

// CareDatasource returns the datasources object for Care(): {"care": {title,
// rows[{topic, text, byline, stale, staleNote, cut, cutNote}], buttonText, clipButton}},
// every string markup-escaped and each text clipped to MaxCardTextRunes: a
// row cut there ends with "…", has cut true and carries its CutNote
// (never a silent cut). Rows are in the
// order the skill speaks them (SpeakingOrder), so the walking instruction is
// never below the fold.
func CareDatasource(c CareCard) map[string]any {
	d := careData{Title: EscapeText(c.Title), ButtonText: EscapeText(WhatsChangedLabel), ClipButton: EscapeText(c.ClipButton),
		Rows: make([]careRowData, 0, len(c.Rows))}
	for _, r := range SpeakingOrder(c.Rows) {
		row := careRowData{
			Topic:  EscapeText(r.Topic),
			Text:   EscapeText(clip(r.Text)),
			Byline: EscapeText(byline(r.Author, r.Age)),
			Stale:  r.Stale,
		}
		if Cut(r.Text) {
			row.Cut, row.CutNote = true, EscapeText(cutNote(r.CutNote))
		}
		if r.Stale {
			row.Byline = EscapeText(staleByline(r.Author, r.Age))
			row.StaleNote = StaleNote
		}
		d.Rows = append(d.Rows, row)
	}
	return map[string]any{"care": d}
}

// RetractionCard is the content of the retraction card.
type RetractionCard struct {
	Title     string // "Your walking instruction has changed"
	Withdrawn string // the sentence he heard, drawn struck through; "" for a first hearing
	Current   string // the new sentence
	Author    string // "Sarah Okafor, physio"
	Age       string // "just now"
	Stale     bool   // the new sentence is past its review date (P-24): the byline leads with the age and says so
	More      string // "" or a note such as "1 more change was spoken"
	// CutNote is drawn under the sentences when the card shows Withdrawn
	// or Current cut (Cut): how to hear all of it. Ignored otherwise.
	CutNote string
}

type retractionData struct {
	Title          string `json:"title"`
	WithdrawnLabel string `json:"withdrawnLabel"`
	Withdrawn      string `json:"withdrawn"`
	CurrentLabel   string `json:"currentLabel"`
	Current        string `json:"current"`
	Byline         string `json:"byline"`
	Stale          bool   `json:"stale"`
	StaleNote      string `json:"staleNote"`
	More           string `json:"more"`
	Cut            bool   `json:"cut"`
	CutNote        string `json:"cutNote"`
	ButtonText     string `json:"buttonText"`
}

// RetractionDatasource returns the datasources object for Retraction():
// {"retraction": {title, withdrawnLabel, withdrawn, currentLabel, current,
// byline, stale, staleNote, more, cut, cutNote, buttonText}}, every string
// markup-escaped and each sentence clipped to MaxCardTextRunes; when either
// is cut there, it ends with "…", cut is true and cutNote says so.
// The byline reads "Sarah Okafor, physio · just now"; when the new sentence
// is stale it leads with the age and says so: "Nine days ago · Sarah
// Okafor, physio · Past its review date. Please check it with your care team."
func RetractionDatasource(c RetractionCard) map[string]any {
	d := retractionData{
		Title:        EscapeText(c.Title),
		Withdrawn:    EscapeText(clip(c.Withdrawn)),
		CurrentLabel: "Now",
		Current:      EscapeText(clip(c.Current)),
		Byline:       EscapeText(byline(c.Author, c.Age)),
		Stale:        c.Stale,
		More:         EscapeText(c.More),
		ButtonText:   EscapeText(WhatsChangedLabel),
	}
	if c.Withdrawn != "" {
		d.WithdrawnLabel = "No longer"
	}
	if Cut(c.Withdrawn) || Cut(c.Current) {
		d.Cut, d.CutNote = true, EscapeText(cutNote(c.CutNote))
	}
	if c.Stale {
		d.StaleNote = StaleNote
		d.Byline = EscapeText(staleByline(c.Author, c.Age) + " · " + StaleNote)
	}
	return map[string]any{"retraction": d}
}

// HelpCard is the content of the help card.
type HelpCard struct {
	Title   string   // "You can ask"
	Phrases []string // things to say, without quotes
	Note    string   // optional closing line
}

type helpData struct {
	Title   string   `json:"title"`
	Phrases []string `json:"phrases"`
	Note    string   `json:"note"`
}

// HelpDatasource returns the datasources object for Help(): {"help": {title,
// phrases[], note}}, every string markup-escaped.
func HelpDatasource(c HelpCard) map[string]any {
	d := helpData{Title: EscapeText(c.Title), Note: EscapeText(c.Note), Phrases: make([]string, len(c.Phrases))}
	for i, p := range c.Phrases {
		d.Phrases[i] = EscapeText(p)
	}
	return map[string]any{"help": d}
}

// DefaultCutNote is drawn under a cut text whose card gives no note of its own.
const DefaultCutNote = "Shortened here. Ask me to hear all of it."

func cutNote(note string) string {
	if strings.TrimSpace(note) == "" {
		return DefaultCutNote
	}
	return note
}

func byline(author, age string) string {
	switch {
	case author == "":
		return age
	case age == "":
		return author
	}
	return author + " · " + age
}

// staleByline leads with the age: "Nine days ago · Dr Mensah, GP".
func staleByline(author, age string) string {
	if age == "" {
		return author
	}
	age = strings.ToUpper(age[:1]) + age[1:]
	if author == "" {
		return age
	}
	return age + " · " + author
}
