package skill

import (
	"strings"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// The APL cards of the Echo Show, in one place: which document a turn
// draws and what its datasource holds. Every version drawn is the one
// confirmed current this turn, its staleness judged now (P-24).

// card returns the RenderDocument for this turn: the retraction card when
// any part of a retraction was spoken — its first part as much as its last,
// so the screen never shows the new words as a plain current row while the
// voice withdraws the old ones — else the requested card. shown is the
// retraction the card draws (zero for another card).
func (t *turn) card(kind cardKind, spoken []segment) (d *Directive, shown models.Announcement) {
	var retractions []models.Announcement
	seen := map[int64]bool{}
	for _, sg := range spoken {
		if a, ok := t.announced[sg.Fact]; ok && sg.Ann == a.ID && a.IsRetraction() && !seen[a.ID] {
			seen[a.ID] = true
			retractions = append(retractions, a)
		}
	}
	if len(retractions) > 0 {
		return renderDirective(apl.Retraction(), apl.RetractionDatasource(t.retractionCard(retractions))), retractions[len(retractions)-1]
	}
	switch kind {
	case cardCare:
		return renderDirective(apl.Care(), apl.CareDatasource(t.careCard())), shown
	case cardHelp:
		return renderDirective(apl.Help(), apl.HelpDatasource(apl.HelpCard{
			Title:   "You can ask",
			Phrases: t.helpPhrases(),
		})), shown
	case cardLink:
		return renderDirective(apl.Help(), apl.HelpDatasource(apl.HelpCard{
			Title:   "Link this device",
			Phrases: []string{"My code is …"},
			Note:    "Ask your carer for a six-digit code.",
		})), shown
	}
	return nil, shown
}

// retractionCard draws the last retraction spoken and counts the others.
func (t *turn) retractionCard(spoken []models.Announcement) apl.RetractionCard {
	a := spoken[len(spoken)-1]
	title := "Your " + models.Topic(a.Current.Domain) + " instruction has changed"
	if a.Current.Audio != nil {
		title = "Your " + models.Topic(a.Current.Domain) + " has changed" // a recording (clip.go)
	}
	// Every wording the voice withdraws, as it says them: what he was told,
	// then what he may have been told, oldest first, "…" standing for the
	// earlier versions withdrawn unquoted (models.Announcement.Withdrawn;
	// F3, F10).
	w := a.Withdrawn()
	var texts []string
	if w.Told != nil {
		texts = append(texts, w.Told.Value)
	}
	if w.Earlier {
		texts = append(texts, "…")
	}
	for _, v := range w.MayHave {
		texts = append(texts, v.Value)
	}
	withdrawn := strings.Join(texts, " · ")
	c := apl.RetractionCard{
		Title:     title,
		Withdrawn: withdrawn,
		Current:   a.Current.Value,
		Author:    a.Changer().AuthorLabel,
		Age:       models.SpokenAge(t.now.Sub(a.Changer().WrittenAt)),
		Stale:     a.Current.IsStale(t.now),
		// The voice says the retraction whole (across "more" when long);
		// "What changed?" says it again in this session.
		CutNote: textCardCutRetraction,
	}
	if n := len(spoken) - 1; n == 1 {
		c.More = "One other change was read out."
	} else if n > 1 {
		c.More = capitalize(models.SpellNumber(n)) + " other changes were read out."
	}
	return c
}

// careCard draws one row per speakable fact.
func (t *turn) careCard() apl.CareCard {
	c := apl.CareCard{Title: "Your care notes"}
	for _, v := range t.facts {
		c.Rows = append(c.Rows, apl.CareRow{
			Topic:  capitalize(models.Topic(v.Domain)),
			Text:   v.Value,
			Author: v.AuthorLabel,
			Age:    models.SpokenAge(t.now.Sub(v.WrittenAt)),
			Stale:  v.IsStale(t.now),
			Lead:   v.Domain == domainWeightBearing, Priority: v.Priority, // the order launch speaks them
			CutNote: cardCutNote(v.Domain),
		})
		if v.Audio != nil && t.playable(v) && (c.ClipButton == "" || v.Domain == domainExerciseClip) {
			c.ClipButton = "Play the " + models.Topic(v.Domain) // clip.go
		}
	}
	return c
}

// What a card says under an instruction it shows cut (apl.Cut): how to
// hear all of it.
const textCardCutRetraction = "Shortened here. Say: what changed, to hear all of it."

func cardCutNote(domain string) string {
	return "Shortened here. Say: tell me about my " + models.Topic(domain) + ", to hear all of it."
}

// cardMarks are the facts the care card shows whole, each told at the
// version it draws: on a screen, what Ray read there he was told, so a
// later revision withdraws it (P-19, P-24). A fact with an announcement
// owed is left to that announcement. A fact the card shows cut (apl.Cut,
// marked so on the card) is not told by it: the screen did not show its
// end, so the ledger must not believe he read it (the voice tells it, and
// marks it, where it says it). But he may have read its beginning: such a
// row is offered (cut, a models.Offer told at the version drawn, recorded
// only if the card is sent), so a later revision withdraws those words
// ("I may have told you: …", finding T15) rather than saying the new ones
// as a first instruction.
func (t *turn) cardMarks() (whole []mark, cut []models.Offer) {
	owed := map[models.URI]bool{}
	for _, a := range t.snap.Pending {
		owed[a.URI()] = true
	}
	for _, v := range t.facts {
		switch {
		case owed[v.FactURI()]:
		case apl.Cut(v.Value):
			cut = append(cut, models.Offer{URI: v.FactURI(), Version: v.N, Told: true})
		default:
			whole = append(whole, mark{URI: v.FactURI(), Version: v.N, Told: true, Card: true})
		}
	}
	return whole, cut
}

func renderDirective(d apl.Doc, ds map[string]any) *Directive {
	return &Directive{Type: RenderDocumentType, Token: d.Token, Document: d.JSON, Datasources: ds}
}
