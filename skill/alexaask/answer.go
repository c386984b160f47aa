package alexaask

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/skill"
	"github.com/unsay/unsay/skill/alexatest"
)

// Answer is a response envelope as a person meets it.
type Answer struct {
	// Heard is outputSpeech with the SSML turned into plain text: what Ray
	// would hear. "" when Alexa says nothing.
	Heard string
	// Reprompt is what Alexa says if he stays silent after a question.
	Reprompt string
	// Session is what happens next: "the microphone opens for his answer",
	// "the session ends", or "the screen stays on (no microphone)".
	Session string
	// Card is the Echo Show card, one line per thing it shows (title
	// first); nil when no RenderDocument was sent.
	Card []string
	// CardName is the document drawn: care, retraction or help.
	CardName string
}

// ReadAnswer decodes a response envelope (the 200 body of /alexa).
func ReadAnswer(raw []byte) (Answer, error) {
	var env skill.ResponseEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return Answer{}, fmt.Errorf("the answer is not an Alexa response envelope: %w", err)
	}
	r := env.Response
	var a Answer
	if r.OutputSpeech != nil {
		a.Heard = alexatest.StripSSML(r.OutputSpeech.SSML + r.OutputSpeech.Text)
	}
	if r.Reprompt != nil {
		a.Reprompt = alexatest.StripSSML(r.Reprompt.OutputSpeech.SSML + r.Reprompt.OutputSpeech.Text)
	}
	switch {
	case r.ShouldEndSession == nil:
		a.Session = "the screen stays on; no microphone (Alexa keeps the session about 30 s)"
	case *r.ShouldEndSession:
		a.Session = "the session ends"
	default:
		a.Session = "the microphone opens for his answer"
	}
	for _, d := range r.Directives {
		if d.Type != skill.RenderDocumentType {
			continue
		}
		a.CardName, a.Card = cardLines(d)
	}
	return a, nil
}

// cardLines turns a RenderDocument's datasources into the lines the card
// shows, in the order it draws them. Datasource text is APL-markup-escaped;
// it is unescaped here for a terminal.
func cardLines(d skill.Directive) (string, []string) {
	raw, _ := json.Marshal(d.Datasources)
	un := html.UnescapeString
	switch d.Token {
	case apl.TokenCare:
		var ds struct {
			Care struct {
				Title string `json:"title"`
				Rows  []struct {
					Topic, Text, Byline, StaleNote string
					Stale                          bool
				} `json:"rows"`
				ButtonText string `json:"buttonText"`
			} `json:"care"`
		}
		_ = json.Unmarshal(raw, &ds)
		lines := []string{un(ds.Care.Title)}
		for _, row := range ds.Care.Rows {
			lines = append(lines, "  "+un(row.Topic)+": "+un(row.Text))
			if row.Stale { // its own line, not "Topic — Past its review date. …: text" (U14)
				lines = append(lines, "      "+un(row.StaleNote))
			}
			lines = append(lines, "      "+un(row.Byline))
		}
		if ds.Care.ButtonText != "" {
			lines = append(lines, "  ["+un(ds.Care.ButtonText)+"]")
		}
		return apl.NameCare, lines
	case apl.TokenRetraction:
		var ds struct {
			R struct {
				Title, WithdrawnLabel, Withdrawn, CurrentLabel, Current, Byline, More, ButtonText string
			} `json:"retraction"`
		}
		_ = json.Unmarshal(raw, &ds)
		lines := []string{un(ds.R.Title)}
		if ds.R.Withdrawn != "" {
			lines = append(lines, "  "+un(ds.R.WithdrawnLabel)+" (struck through): "+un(ds.R.Withdrawn))
		}
		lines = append(lines, "  "+un(ds.R.CurrentLabel)+": "+un(ds.R.Current), "      "+un(ds.R.Byline))
		if ds.R.More != "" {
			lines = append(lines, "  "+un(ds.R.More))
		}
		if ds.R.ButtonText != "" {
			lines = append(lines, "  ["+un(ds.R.ButtonText)+"]")
		}
		return apl.NameRetraction, lines
	case apl.TokenHelp:
		var ds struct {
			Help struct {
				Title   string   `json:"title"`
				Phrases []string `json:"phrases"`
				Note    string   `json:"note"`
			} `json:"help"`
		}
		_ = json.Unmarshal(raw, &ds)
		lines := []string{un(ds.Help.Title)}
		for _, p := range ds.Help.Phrases {
			lines = append(lines, "  “"+un(p)+"”")
		}
		if ds.Help.Note != "" {
			lines = append(lines, "  "+un(ds.Help.Note))
		}
		return apl.NameHelp, lines
	}
	return d.Token, []string{"(a card this tool does not know: " + d.Token + ")"}
}

// String is the answer as `unsay ask` prints it.
func (a Answer) String() string {
	var b strings.Builder
	if a.Heard != "" {
		fmt.Fprintf(&b, "Ray hears: %s\n", a.Heard)
	} else {
		fmt.Fprintf(&b, "Ray hears nothing.\n")
	}
	if a.Reprompt != "" {
		fmt.Fprintf(&b, "If he says nothing: %s\n", a.Reprompt)
	}
	fmt.Fprintf(&b, "Then: %s.\n", a.Session)
	if a.Card != nil {
		fmt.Fprintf(&b, "The card (%s) shows:\n", a.CardName)
		for _, l := range a.Card {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}
