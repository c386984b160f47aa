package skill

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// Device linking by voice: "my code is …" redeems a six-digit code a carer
// created with POST /link (LinkDeviceIntent); an unlinked device hears only
// how to link.

func unlinkedReply(env *RequestEnvelope) reply {
	switch {
	case env.Request.Type == TypeAPLUserEvent && env.Request.FirstArgument() == apl.ArgTick:
		return reply{empty: true}
	case env.Request.Type == TypeIntent && isLeaving(env.Request.Intent.Name):
		return reply{segs: say(textGoodbye), end: endLeave, forget: true}
	}
	return reply{question: textUnlinked, reprompt: textLinkPrompt, card: cardLink}
}

// linkDevice redeems a six-digit code (100000–999999) and, once linked,
// answers like a launch for the new patient. Its refusals (no code, a
// wrong shape, a wrong code, blocked, paused, linking off, an error) are
// said to a device whose patient is already known after what he is owed,
// like every other answer (refuse, finding U4).
func (s *Skill) linkDevice(ctx context.Context, env *RequestEnvelope, now time.Time) handled {
	if s.links == nil {
		return s.refuse(ctx, env, now, reply{segs: say(textLinkOff), end: endLeave})
	}
	code := strings.ReplaceAll(strings.TrimSpace(env.Request.Intent.Slots[SlotCode].Value), " ", "")
	switch {
	case code == "" || code == "?":
		return s.refuse(ctx, env, now, reply{question: textCodeAsk, reprompt: textLinkPrompt, card: cardLink})
	case !validLinkCode(code):
		return s.refuse(ctx, env, now, reply{question: textCodeShape, reprompt: textLinkPrompt, card: cardLink})
	}
	patient, err := s.links.RedeemLinkCode(ctx, env.UserID(), env.Context.System.APIEndpoint, code, now)
	var paused *LinkPausedError
	switch {
	case errors.As(err, &paused):
		return s.refuse(ctx, env, now, reply{segs: say(codePaused(paused.Until.Sub(now))), end: endLeave})
	case errors.Is(err, ErrLinkBlocked):
		return s.refuse(ctx, env, now, reply{segs: say(textCodeBlocked), end: endLeave})
	case errors.Is(err, ErrLinkCodeInvalid):
		return s.refuse(ctx, env, now, reply{question: textCodeWrong, reprompt: textLinkPrompt, card: cardLink})
	case err != nil:
		s.log.Error("alexa link code", "err", err)
		return s.refuse(ctx, env, now, reply{segs: say(textSorry), end: endLeave})
	case !models.ValidID(patient):
		s.log.Error("alexa link code: invalid patient id from Links", "patient", patient)
		return s.refuse(ctx, env, now, reply{segs: say(textSorry), end: endLeave})
	}
	s.log.Info("alexa device linked", "patient", patient)
	release := s.lockPatient(patient)
	lt := s.newTurn(ctx, env, now, patient)
	lt.prefix = say(textLinked)
	h := s.build(lt, linkedLaunch(lt))
	h.release = release
	h.turn, h.route = lt, linkedLaunch
	return h
}

// refuse answers a linking request it refuses with r. On a device whose
// patient is already known (patientFor: linked by account or code, or the
// default patient) what he is owed is said first, as on every other turn
// (P-19, P-24, finding U4): the care source confirms the turn, the
// announcements come before r, under the patient's turn lock when any is
// owed, and the response is built again when a revision overtakes it.
// When the notes cannot be confirmed r is said after the instructions
// known to have changed (changedSince), nothing as current. A device
// with no patient (or whose patient cannot be looked up) has nothing to
// announce: it hears r alone.
func (s *Skill) refuse(ctx context.Context, env *RequestEnvelope, now time.Time, r reply) handled {
	patient, err := s.patientFor(ctx, env)
	if err != nil {
		s.log.Error("alexa linked patient", "err", err)
	}
	if err != nil || patient == "" {
		return s.build(&turn{s: s, ctx: ctx, env: env, now: now, apl: env.SupportsAPL()}, r)
	}
	route := func(t *turn) reply {
		if err := t.load(); err != nil {
			t.s.log.Error("alexa care notes not confirmed; nothing said as current", "patient", t.patient, "err", err)
			out := r
			out.segs = append(say(changedSince(t.snap.Withdrawn)), r.segs...)
			return out
		}
		t.announce()
		return r
	}
	t := s.newTurn(ctx, env, now, patient)
	rep := route(t)
	release := noop
	if len(t.snap.Pending) > 0 {
		release = s.lockPatient(patient) // as in handle: decided again under the lock
		t = s.newTurn(ctx, env, s.now(), patient)
		rep = route(t)
	}
	h := s.build(t, rep)
	h.release = release
	h.turn, h.route = t, route
	return h
}

// linkedLaunch answers the turn that linked the device: the launch, after
// what he is owed — or, when the notes cannot be confirmed, nothing as
// current (P-24).
func linkedLaunch(t *turn) reply {
	if err := t.load(); err != nil {
		t.s.log.Error("alexa care notes not confirmed; nothing said as current", "patient", t.patient, "err", err)
		return reply{segs: say(textUnreachable, changedSince(t.snap.Withdrawn), textTryAgain), end: endLeave}
	}
	t.announce()
	return t.launch()
}

func validLinkCode(code string) bool {
	if len(code) != 6 || code[0] == '0' {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}
