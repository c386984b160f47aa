package cmd

import (
	"slices"
	"testing"
)

// A subcommand's id comes first and flags may follow it; an id that
// starts with "-" (a grant made before grant ids had a prefix) is given
// after "--" — without it, it is read as a flag, never as the id.
func TestSplitSubcommand_TakesTheLeadingIdAndOneThatStartsWithADashAfterDashDash(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		sub, id  string
		rest     []string
		wantFail bool
	}{
		{args: []string{"revoke", "ac:xr04", "--by", "carer"}, sub: "revoke", id: "ac:xr04", rest: []string{"--by", "carer"}},
		{args: []string{"revoke", "--", "-xr04oTyUrK6Ss6W", "--db", "x.db"}, sub: "revoke", id: "-xr04oTyUrK6Ss6W", rest: []string{"--db", "x.db"}},
		{args: []string{"revoke", "-xr04oTyUrK6Ss6W", "--db", "x.db"}, sub: "revoke", id: "", rest: []string{"-xr04oTyUrK6Ss6W", "--db", "x.db"}},
		{args: []string{"list", "--all"}, sub: "list", id: "", rest: []string{"--all"}},
		{args: []string{"list", "--"}, sub: "list", id: "", rest: []string{"--"}},
		{args: []string{"delete", "x"}, wantFail: true},
	} {
		sub, id, rest, err := splitSubcommand(tc.args, "list", "revoke")
		if tc.wantFail {
			if err == nil {
				t.Errorf("%q: accepted", tc.args)
			}
			continue
		}
		if err != nil || sub != tc.sub || id != tc.id || !slices.Equal(rest, tc.rest) {
			t.Errorf("%q: sub %q id %q rest %q err %v; want %q %q %q", tc.args, sub, id, rest, err, tc.sub, tc.id, tc.rest)
		}
	}
}
