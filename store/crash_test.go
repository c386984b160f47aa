package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/unsay/unsay/models"
)

// crashChildEnv switches the test binary into the crash child: it opens the
// store at the path in this variable and publishes until killed, printing
// "ack {n} {hash}" after each Publish returns (is acknowledged).
const crashChildEnv = "UNSAY_STORE_CRASH_CHILD"

// crashWritersEnv makes the crash child publish from this many concurrent
// writers, each to its own domain of ray (group commit), printing
// "ack {domain} {n} {hash}".
const crashWritersEnv = "UNSAY_STORE_CRASH_WRITERS"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(runBackends(m)) // SQLite, then Postgres when UNSAY_TEST_POSTGRES is set
}

func crashChild(path string) {
	ctx := context.Background()
	s, err := Open(ctx, Options{DSN: path, AuditKey: []byte("test-audit-key")})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	w := models.System("crash", models.ScopeWrite)
	if n, _ := strconv.Atoi(os.Getenv(crashWritersEnv)); n > 0 {
		for i := range n {
			go func() {
				domain := "crash_" + strconv.Itoa(i)
				for j := 0; ; j++ {
					pi := PublishInput{Patient: "ray", Domain: domain, Audience: models.AudienceUser,
						Value: "revision " + strconv.Itoa(j), AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio",
						Audit: &AuditEntry{Actor: "crash", Via: "hmac", Author: "okafor"}}
					r, err := s.Publish(ctx, w, pi)
					if err != nil {
						fmt.Println("error", err)
						os.Exit(3)
					}
					fmt.Printf("ack %s %d %s\n", domain, r.Version.N, r.Version.Hash)
				}
			}()
		}
		select {}
	}
	for i := 0; ; i++ {
		pi := PublishInput{Patient: "ray", Domain: "weight_bearing", Audience: models.AudienceUser,
			Value: "revision " + strconv.Itoa(i), AuthorID: "okafor", AuthorLabel: "Sarah Okafor, physio", Priority: 0.5}
		r, err := s.Publish(ctx, w, pi)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Printf("ack %d %s\n", r.Version.N, r.Version.Hash)
	}
}

// TestPublish_P20_AcknowledgedWritesSurviveKill9: a child process publishes
// in a loop and is SIGKILLed mid-stream; after reopening, every version it
// acknowledged is present with the acknowledged hash and the chain verifies.
func TestPublish_P20_AcknowledgedWritesSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := testDSN(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[int]string{}
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			cmd.Process.Kill()
			t.Fatalf("child: %s", sc.Text())
		}
		n, _ := strconv.Atoi(f[1])
		acked[n] = f[2]
		if len(acked) == 150 || time.Now().After(deadline) {
			// Kill while the child is mid-publish.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	for sc.Scan() { // acks printed before the kill landed count too
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "ack" {
			n, _ := strconv.Atoi(f[1])
			acked[n] = f[2]
		}
	}
	cmd.Wait()
	if len(acked) < 10 {
		t.Fatalf("child acknowledged only %d writes", len(acked))
	}

	s, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hist, err := s.History(context.Background(), userRay, "care://ray/weight_bearing")
	if err != nil {
		t.Fatal(err)
	}
	have := map[int]string{}
	for _, v := range hist {
		have[v.N] = v.Hash
	}
	for n, h := range acked {
		if have[n] != h {
			t.Fatalf("acknowledged v%d (%s) is %q after kill -9", n, h, have[n])
		}
	}
	r, err := s.Verify(context.Background(), userRay, "care://ray/weight_bearing")
	if err != nil || !r.Intact {
		t.Fatalf("chain after kill -9: %+v, %v", r.BrokenAt, err)
	}
	t.Logf("%d acknowledged, %d present after kill -9", len(acked), len(hist))
}

// TestPublish_P20_GroupCommittedWritesSurviveKill9: sixteen concurrent
// writers (their commits grouped, several per fsync) are SIGKILLed
// mid-stream; after reopening, every version any of them acknowledged is
// present with the acknowledged hash, every chain verifies and so does the
// audit log.
func TestPublish_P20_GroupCommittedWritesSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := testDSN(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashWritersEnv+"=16")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]string{} // "domain/n" → hash
	record := func(line string) bool {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "ack" {
			return false
		}
		acked[f[1]+"/"+f[2]] = f[3]
		return true
	}
	sc := bufio.NewScanner(out)
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() {
		if !record(sc.Text()) {
			cmd.Process.Kill()
			t.Fatalf("child: %s", sc.Text())
		}
		if len(acked) == 600 || time.Now().After(deadline) {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	for sc.Scan() { // acks printed before the kill landed count too
		record(sc.Text())
	}
	cmd.Wait()
	if len(acked) < 32 {
		t.Fatalf("the writers acknowledged only %d writes", len(acked))
	}
	s, err := Open(context.Background(), Options{DSN: path, AuditKey: []byte("test-audit-key")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	present := 0
	for i := range 16 {
		uri := "care://ray/crash_" + strconv.Itoa(i)
		hist, err := s.History(context.Background(), userRay, uri)
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		have := map[int]string{}
		for _, v := range hist {
			have[v.N] = v.Hash
		}
		present += len(hist)
		for k, h := range acked {
			dom, n, _ := strings.Cut(k, "/")
			if dom != "crash_"+strconv.Itoa(i) {
				continue
			}
			v, _ := strconv.Atoi(n)
			if have[v] != h {
				t.Fatalf("acknowledged %s v%d (%s) is %q after kill -9", uri, v, h, have[v])
			}
		}
		if len(hist) > 0 {
			if r, err := s.Verify(context.Background(), userRay, uri); err != nil || !r.Intact {
				t.Fatalf("chain %s after kill -9: %+v, %v", uri, r.BrokenAt, err)
			}
		}
	}
	if v, err := s.VerifyAuditLog(context.Background()); err != nil || v.BadRow != 0 {
		t.Fatalf("audit log after kill -9: %+v, %v", v, err)
	}
	t.Logf("%d acknowledged by 16 writers, %d present after kill -9", len(acked), present)
}
