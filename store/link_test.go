package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLinkCode_SixDigitsSingleUse(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	code, exp, err := s.CreateLinkCode(ctx, "ray", now)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) != 6 || code[0] == '0' || !exp.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("code %q expires %v", code, exp)
	}
	patient, err := s.RedeemLinkCode(ctx, "amzn1.ask.account.A", "https://api.eu.amazonalexa.com", code, now.Add(time.Minute))
	if err != nil || patient != "ray" {
		t.Fatalf("Redeem = %q, %v", patient, err)
	}
	p, ep, ok, err := s.LinkedPatient(ctx, "amzn1.ask.account.A")
	if err != nil || !ok || p != "ray" || ep != "https://api.eu.amazonalexa.com" {
		t.Fatalf("LinkedPatient = %q %q %v %v", p, ep, ok, err)
	}
	users, err := s.LinkedUsers(ctx, "ray")
	if err != nil || len(users) != 1 || users[0].UserID != "amzn1.ask.account.A" {
		t.Fatalf("LinkedUsers = %+v, %v", users, err)
	}
	if ps, err := s.LinkedPatients(ctx); err != nil || len(ps) != 1 || ps[0] != "ray" {
		t.Fatalf("LinkedPatients = %v, %v", ps, err)
	}
	if us, _ := s.LinkedUsers(ctx, "sue"); len(us) != 0 {
		t.Fatalf("LinkedUsers(sue) = %+v", us)
	}
	if _, err := s.RedeemLinkCode(ctx, "amzn1.ask.account.B", "", code, now.Add(2*time.Minute)); !errors.Is(err, ErrLinkCodeInvalid) {
		t.Fatalf("second use of a code: %v, want ErrLinkCodeInvalid", err)
	}
	if _, _, ok, _ := s.LinkedPatient(ctx, "amzn1.ask.account.B"); ok {
		t.Fatal("second use linked a user")
	}
}

func TestLinkCode_ExpiresAfterTenMinutes(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	code, _, err := s.CreateLinkCode(ctx, "ray", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemLinkCode(ctx, "u", "", code, now.Add(10*time.Minute)); !errors.Is(err, ErrLinkCodeInvalid) {
		t.Fatalf("expired code: %v", err)
	}
	code2, _, _ := s.CreateLinkCode(ctx, "ray", now)
	if _, err := s.RedeemLinkCode(ctx, "u", "", code2, now.Add(10*time.Minute-time.Millisecond)); err != nil {
		t.Fatalf("code within its ten minutes: %v", err)
	}
}

func TestLinkCode_FiveWrongCodesBlockTheUserForFifteenMinutes(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	code, _, err := s.CreateLinkCode(ctx, "ray", now)
	if err != nil {
		t.Fatal(err)
	}
	wrong := "000000"
	for i := range 5 {
		if _, err := s.RedeemLinkCode(ctx, "attacker", "", wrong, now.Add(time.Duration(i)*time.Second)); !errors.Is(err, ErrLinkCodeInvalid) {
			t.Fatalf("wrong code %d: %v", i+1, err)
		}
	}
	if _, err := s.RedeemLinkCode(ctx, "attacker", "", code, now.Add(time.Minute)); !errors.Is(err, ErrLinkBlocked) {
		t.Fatalf("right code while blocked: %v, want ErrLinkBlocked", err)
	}
	// Another user is not blocked, and the code survived the blocked attempt.
	if _, err := s.RedeemLinkCode(ctx, "ray-echo", "", code, now.Add(time.Minute)); err != nil {
		t.Fatalf("other user: %v", err)
	}
	code2, _, _ := s.CreateLinkCode(ctx, "ray", now.Add(16*time.Minute))
	if p, err := s.RedeemLinkCode(ctx, "attacker", "", code2, now.Add(16*time.Minute)); err != nil || p != "ray" {
		t.Fatalf("after the block: %q, %v", p, err)
	}
}

func TestLinkCode_FourWrongCodesDoNotBlock(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	code, _, _ := s.CreateLinkCode(ctx, "ray", now)
	for range 4 {
		s.RedeemLinkCode(ctx, "u", "", "12345", now)
	}
	if _, err := s.RedeemLinkCode(ctx, "u", "", code, now); err != nil {
		t.Fatalf("after four wrong codes: %v", err)
	}
}

func TestLinkCode_WrongCodesOlderThanTenMinutesDoNotCount(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	for i := range 4 {
		s.RedeemLinkCode(ctx, "u", "", "000000", now.Add(time.Duration(i)*time.Second))
	}
	later := now.Add(11 * time.Minute)
	s.RedeemLinkCode(ctx, "u", "", "000000", later)
	code, _, _ := s.CreateLinkCode(ctx, "ray", later)
	if _, err := s.RedeemLinkCode(ctx, "u", "", code, later); err != nil {
		t.Fatalf("stale failures counted: %v", err)
	}
}

func TestLinkCode_ManyUsersGuessingTogetherAreStoppedAtTheGlobalLimit(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	code, _, err := s.CreateLinkCode(ctx, "ray", now)
	if err != nil {
		t.Fatal(err)
	}
	// LinkGlobalMaxFailures wrong codes from as many accounts, each below
	// its own limit, add up to the global one.
	for i := range LinkGlobalMaxFailures {
		user := "guesser-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, err := s.RedeemLinkCode(ctx, user, "", "000000", now.Add(time.Second)); !errors.Is(err, ErrLinkCodeInvalid) {
			t.Fatalf("guess %d: %v", i+1, err)
		}
	}
	_, err = s.RedeemLinkCode(ctx, "ray-echo", "", code, now.Add(2*time.Second))
	var paused *LinkPausedError
	if !errors.As(err, &paused) || !errors.Is(err, ErrLinkPaused) || !errors.Is(err, ErrLinkBlocked) {
		t.Fatalf("redeem past the global limit: %v, want a *LinkPausedError (ErrLinkPaused, ErrLinkBlocked)", err)
	}
	// It says how long it lasts: until the failures leave the window.
	if want := now.Add(time.Second + LinkFailureWindow).UTC().Truncate(time.Millisecond); !paused.Until.Equal(want) {
		t.Fatalf("paused until %v, want %v", paused.Until, want)
	}
	// Just before then, still paused; at Until, a right code links again.
	if _, err := s.RedeemLinkCode(ctx, "ray-echo", "", code, paused.Until.Add(-time.Millisecond)); !errors.Is(err, ErrLinkPaused) {
		t.Fatalf("a millisecond before the pause ends: %v, want ErrLinkPaused", err)
	}
	fresh, _, _ := s.CreateLinkCode(ctx, "ray", paused.Until) // the first one expired meanwhile
	if p, err := s.RedeemLinkCode(ctx, "ray-echo", "", fresh, paused.Until); err != nil || p != "ray" {
		t.Fatalf("at the end of the pause: %q, %v", p, err)
	}
	// A user's own block is not the global pause.
	for range LinkMaxFailures {
		s.RedeemLinkCode(ctx, "clumsy", "", "000000", paused.Until.Add(time.Second))
	}
	if _, err := s.RedeemLinkCode(ctx, "clumsy", "", "000000", paused.Until.Add(2*time.Second)); !errors.Is(err, ErrLinkBlocked) || errors.Is(err, ErrLinkPaused) {
		t.Fatalf("one user's block: %v, want ErrLinkBlocked and not ErrLinkPaused", err)
	}
	// Twin: once the window slides, a right code links again.
	later := now.Add(LinkFailureWindow + 3*time.Second)
	code2, _, _ := s.CreateLinkCode(ctx, "ray", later)
	if p, err := s.RedeemLinkCode(ctx, "ray-echo", "", code2, later); err != nil || p != "ray" {
		t.Fatalf("after the window: %q, %v", p, err)
	}
}

func TestLinkCode_APatientHasAtMostThreeLiveCodes(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	var codes []string
	for i := range 5 {
		c, _, err := s.CreateLinkCode(ctx, "ray", now.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, c)
	}
	at := now.Add(10 * time.Second)
	for i, c := range codes {
		_, err := s.RedeemLinkCode(ctx, "echo-"+string(rune('a'+i)), "", c, at)
		if retired := i < 5-LinkMaxLiveCodes; retired != errors.Is(err, ErrLinkCodeInvalid) {
			t.Errorf("code %d of 5: err %v, retired %v", i+1, err, retired)
		}
	}
}

// LinkedPatient may answer from memory (linkCache); a user who was unlinked
// when asked, then linked, then linked to another patient, is answered
// each patient in turn right after each redeem commits.
func TestLinkedPatient_FollowsEveryRedeemAfterBeingAsked(t *testing.T) {
	s, _ := openTest(t, nil)
	ctx := context.Background()
	now := demoNow(t)
	const user = "amzn1.ask.account.RELINK"
	for i := range 3 {
		if _, _, ok, err := s.LinkedPatient(ctx, user); err != nil || ok {
			t.Fatalf("before any link (ask %d): ok=%v err=%v", i, ok, err)
		}
	}
	for _, patient := range []string{"ray", "sue", "ray"} {
		code, _, err := s.CreateLinkCode(ctx, patient, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RedeemLinkCode(ctx, user, "https://api.eu.amazonalexa.com", code, now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if p, _, ok, err := s.LinkedPatient(ctx, user); err != nil || !ok || p != patient {
				t.Fatalf("after linking to %s (ask %d): %q ok=%v err=%v", patient, i, p, ok, err)
			}
		}
	}
}
