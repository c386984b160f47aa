package main

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func feedAll(t *testing.T, stream string) (*tally, map[string]result) {
	t.Helper()
	tl := newTally(io.Discard)
	sc := bufio.NewScanner(strings.NewReader(stream))
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad fixture line %q: %v", sc.Text(), err)
		}
		tl.feed(e)
	}
	return tl, tl.finish()
}

func TestTally_CountsLeavesAndPartsAndNotes(t *testing.T) {
	stream := `{"Action":"run","Package":"github.com/unsay/unsay/test","Test":"TestMCPHost_X"}
{"Action":"run","Package":"github.com/unsay/unsay/test","Test":"TestMCPHost_X/a"}
{"Action":"pass","Package":"github.com/unsay/unsay/test","Test":"TestMCPHost_X/a"}
{"Action":"run","Package":"github.com/unsay/unsay/test","Test":"TestMCPHost_X/b"}
{"Action":"output","Package":"github.com/unsay/unsay/test","Test":"TestMCPHost_X/b","Output":"    x_test.go:1: SKIPPED: 1 MCP — Node missing; install with apt\n"}
{"Action":"skip","Package":"github.com/unsay/unsay/test","Test":"TestMCPHost_X/b"}
{"Action":"pass","Package":"github.com/unsay/unsay/test","Test":"TestMCPHost_X"}
{"Action":"run","Package":"github.com/unsay/unsay/test","Test":"TestDemo_Y"}
{"Action":"fail","Package":"github.com/unsay/unsay/test","Test":"TestDemo_Y"}
{"Action":"run","Package":"p","Test":"TestUnrelated"}
{"Action":"pass","Package":"p","Test":"TestUnrelated"}
{"Action":"fail","Package":"github.com/unsay/unsay/test"}
`
	tl, res := feedAll(t, stream)
	want := map[string]result{
		"":                          {passed: 2, failed: 1, skipped: 1},
		"1 MCP TypeScript SDK host": {passed: 1, skipped: 1},
		"7 demo as a test":          {failed: 1},
		"other":                     {passed: 1},
	}
	for k, w := range want {
		if d := cmp.Diff(w, res[k], cmp.AllowUnexported(result{})); d != "" {
			t.Errorf("%q (-want +got):\n%s", k, d)
		}
	}
	if len(tl.notes) != 1 || !strings.HasPrefix(tl.notes[0], "SKIPPED: 1 MCP") {
		t.Errorf("notes = %q", tl.notes)
	}
}

func TestTally_SubtestNamesWithSlashesCountThroughTheirParent(t *testing.T) {
	// t.Run("/clinician") makes "TestH//clinician": its parent is TestH.
	stream := `{"Action":"run","Package":"p","Test":"TestH"}
{"Action":"run","Package":"p","Test":"TestH//clinician"}
{"Action":"fail","Package":"p","Test":"TestH//clinician"}
{"Action":"fail","Package":"p","Test":"TestH"}
{"Action":"fail","Package":"p"}
`
	_, res := feedAll(t, stream)
	if got := res[""]; got != (result{failed: 1}) {
		t.Errorf("got %+v, want exactly one failure (the subtest)", got)
	}
}

func TestTally_ParentFailingWithoutFailingSubtestCountsItself(t *testing.T) {
	stream := `{"Action":"run","Package":"p","Test":"TestP"}
{"Action":"run","Package":"p","Test":"TestP/ok"}
{"Action":"pass","Package":"p","Test":"TestP/ok"}
{"Action":"fail","Package":"p","Test":"TestP"}
`
	_, res := feedAll(t, stream)
	if got := res[""]; got != (result{passed: 1, failed: 1}) {
		t.Errorf("got %+v, want 1 passed, 1 failed", got)
	}
}

func TestTally_UnfinishedTestAndBuildFailureAreFailures(t *testing.T) {
	stream := `{"Action":"run","Package":"p","Test":"TestPanics"}
{"Action":"output","Package":"p","Test":"TestPanics","Output":"panic: boom\n"}
{"Action":"fail","Package":"p"}
{"Action":"fail","Package":"q"}
`
	_, res := feedAll(t, stream)
	if got := res[""]; got != (result{failed: 2}) {
		t.Errorf("got %+v, want 2 failed (the unfinished test, package q's build)", got)
	}
}

func TestTally_AllPassingPackageHasNoFailure(t *testing.T) {
	stream := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p"}
`
	_, res := feedAll(t, stream)
	if got := res[""]; got != (result{passed: 1}) {
		t.Errorf("got %+v", got)
	}
}

func TestResultString_ClosingLineFormat(t *testing.T) {
	cases := map[result]string{
		{passed: 3, failed: 0}:             "3 passed, 0 failed",
		{passed: 3, failed: 1, skipped: 2}: "3 passed, 1 failed, 2 skipped",
	}
	for r, want := range cases {
		if got := r.String(); got != want {
			t.Errorf("%+v: %q, want %q", r, got, want)
		}
	}
}

func TestPartOf_MatchesPackageAndPrefix(t *testing.T) {
	cases := []struct{ pkg, test, want string }{
		{e2ePkg, "TestDemo_X/sub", "7 demo as a test"},
		{e2ePkg + "/multi", "TestTwoInstances_Y", "two instances on Postgres"},
		{"github.com/unsay/unsay/store", "TestDemo_Z", "other"},
		{e2ePkg, "TestSomethingElse", "other"},
	}
	for _, c := range cases {
		if got := partOf(c.pkg, c.test); got != c.want {
			t.Errorf("partOf(%s, %s) = %q, want %q", c.pkg, c.test, got, c.want)
		}
	}
}
