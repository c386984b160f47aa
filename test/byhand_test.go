//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// TestByHand_TheREADMEsTryingItByHandSectionWorksAsWritten reads README.md's
// "Trying it by hand" section and runs it literally against a server
// started as `make run` starts it (development Alexa, Ray as the default
// patient) on a free port: every `bin/unsay …` line of its first sh block
// in a shell, in order (UNSAY_URL points them at the server, as the section
// says), and the minimal request body of its curl line posted to /alexa.
// Each line must succeed, and the story must be told: the walking
// instruction, the saved revision, the retraction on the next turn, a link
// code valid for 10 minutes.
func TestByHand_TheREADMEsTryingItByHandSectionWorksAsWritten(t *testing.T) {
	const part = "README by hand"
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)
	i := strings.Index(sec, "## Trying it by hand")
	if i < 0 {
		t.Fatal(`README.md has no "## Trying it by hand"`)
	}
	sec = sec[i+3:]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(sec, -1)
	if len(blocks) < 2 {
		t.Fatalf("want the commands block and the curl block, found %d sh blocks", len(blocks))
	}
	var lines []string
	for _, l := range strings.Split(blocks[0][1], "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "bin/unsay ") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 4 {
		t.Fatalf("the commands block has %d bin/unsay lines", len(lines))
	}

	s := startServer(t, part, "--alexa-verify=false", "--default-patient", "ray")
	// make run's banner appears once Ray can be answered; here, wait for /readyz.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := http.Get(s.URL + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 30 s")
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "unsay")); err != nil {
		t.Fatal(err)
	}
	expect := []struct{ cmd, out string }{
		{`ask "what's my walking instruction"`, "Ray hears: Your walking instruction from"},
		{"write --patient ray", "saved care://ray/weight_bearing as version 3; Ray will hear the retraction at his next turn"},
		{`ask "open care notes"`, "Stop — your walking instruction has changed."},
		{`ask "what changed" "say that again"`, "(AMAZON.RepeatIntent)"},
		{"link --patient ray", "valid for 10 minutes"},
	}
	for _, line := range lines {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Dir = dir
		cmd.Env = harness.Env("UNSAY_URL=" + s.URL)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", line, err, out.String(), errb.String())
		}
		for _, e := range expect {
			if strings.Contains(line, e.cmd) && !strings.Contains(out.String(), e.out) {
				t.Errorf("%s printed no %q:\n%s", line, e.out, out.String())
			}
		}
		t.Logf("$ %s\n%s", line, out.String())
	}

	// The copyable request body, as curl sends it.
	body := regexp.MustCompile(`(?s)-d '(.*?)'`).FindStringSubmatch(blocks[1][1])
	if body == nil || !strings.Contains(blocks[1][1], "http://127.0.0.1:8080/alexa") {
		t.Fatalf("no curl … http://127.0.0.1:8080/alexa -d '…' line in:\n%s", blocks[1][1])
	}
	resp, err := http.Post(s.URL+"/alexa", "application/json", strings.NewReader(body[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Response struct {
			OutputSpeech struct{ SSML string } `json:"outputSpeech"`
		} `json:"response"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&env) != nil ||
		!strings.Contains(env.Response.OutputSpeech.SSML, "Your walking instruction from Sarah Okafor, physio") {
		t.Errorf("the README's request body: %d %q, want the (revised) walking instruction", resp.StatusCode, env.Response.OutputSpeech.SSML)
	}
}
