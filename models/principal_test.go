package models

import (
	"slices"
	"testing"
)

func TestPrincipal_P21_BoundToItsPatients(t *testing.T) {
	t.Parallel()
	p := Principal{Scopes: []Scope{ScopeReadUser}, Patients: []string{"ray"}}
	if !p.CanRead("ray", AudienceUser) {
		t.Fatal("bound patient not readable")
	}
	if p.CanRead("sue", AudienceUser) {
		t.Fatal("another patient readable")
	}
	if (Principal{Scopes: []Scope{ScopeReadUser}}).CanRead("ray", AudienceUser) {
		t.Fatal("a principal with no patients reads something")
	}
	if !System("s", ScopeReadUser).CanRead("anyone", AudienceUser) {
		t.Fatal("System principal not bound to every patient")
	}
}

func TestPrincipal_P1_ReadScopeFollowsTheAudience(t *testing.T) {
	t.Parallel()
	user := Principal{Scopes: []Scope{ScopeReadUser}, Patients: []string{"ray"}}
	dual := Principal{Scopes: []Scope{ScopeReadUser, ScopeReadAssistant}, Patients: []string{"ray"}}
	if user.CanRead("ray", AudienceAssistant) {
		t.Fatal("care.read.user reads assistant records")
	}
	if !dual.CanRead("ray", AudienceAssistant) {
		t.Fatal("care.read.assistant cannot read assistant records")
	}
	if dual.CanRead("ray", Audience("admin")) {
		t.Fatal("unknown audience readable")
	}
	u, _ := ParseURI("care-internal://ray/risk")
	if user.CanReadURI(u) || !dual.CanReadURI(u) {
		t.Fatal("CanReadURI does not follow the scheme's scope")
	}
}

func TestPrincipal_NarrowNeverWidens(t *testing.T) {
	t.Parallel()
	p := Principal{Subject: "h", Scopes: []Scope{ScopeReadUser}, Patients: []string{"ray"}}
	n := p.Narrow(ScopeReadUser, ScopeReadAssistant)
	if !slices.Equal(n.Scopes, []Scope{ScopeReadUser}) {
		t.Fatalf("Narrow widened: %v", n.Scopes)
	}
	dual := Principal{Scopes: []Scope{ScopeReadUser, ScopeReadAssistant, ScopeWrite}, Patients: []string{"ray"}}
	if got := dual.Narrow(ScopeReadUser); !slices.Equal(got.Scopes, []Scope{ScopeReadUser}) || got.Can(ScopeReadAssistant) {
		t.Fatalf("Narrow(user) = %v", got.Scopes)
	}
	n.Patients[0] = "x"
	if p.Patients[0] != "ray" {
		t.Fatal("Narrow shares the Patients slice")
	}
}

func TestPartitions_OneRowPerSchemeAndAudience(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range Partitions() {
		if seen[p.Scheme] || seen[string(p.Audience)] {
			t.Fatalf("duplicate row %+v", p)
		}
		seen[p.Scheme], seen[string(p.Audience)] = true, true
		if ReadScope(p.Audience) != p.Scope {
			t.Fatalf("ReadScope(%s) = %s, want %s", p.Audience, ReadScope(p.Audience), p.Scope)
		}
	}
	if ReadScope("nobody") != "" {
		t.Fatal("unknown audience has a read scope")
	}
}
