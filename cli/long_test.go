package cli

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestAddTokenAndComplete: add token prints the completion URL once; one
// POST fires the watch, a second is refused as already used, and a wrong
// token is not found.
func TestAddTokenAndComplete(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "token", "--note", "deploy")
	if r.code != 0 {
		t.Fatalf("add token: %+v", r)
	}
	m := regexp.MustCompile(`Completion URL \(shown only now; it is a secret\): (\S+)`).FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(r.stdout, "curl -fsS -X POST") {
		t.Fatalf("add token printed %q, want the URL and a curl example", r.stdout)
	}
	url := m[1]
	id := regexp.MustCompile(`as (\S+) \(`).FindStringSubmatch(r.stdout)[1]
	post := func(u string) int {
		resp, err := http.Post(u, "application/json", strings.NewReader(`{"status":"success","data":{"v":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(url); code != 200 {
		t.Fatalf("first POST = %d, want 200", code)
	}
	if r := d.vigil(t, "wait", id, "--timeout", "5s"); r.code != 0 {
		t.Fatalf("wait after completion: %+v", r)
	}
	if code := post(url); code != 409 {
		t.Fatalf("second POST = %d, want 409", code)
	}
	if code := post(url[:len(url)-4] + "AAAA"); code != 404 {
		t.Fatalf("POST with a wrong secret = %d, want 404", code)
	}
	if r := d.vigil(t, "show", id, "--json"); strings.Contains(r.stdout, url[strings.LastIndex(url, ".")+1:]) {
		t.Fatalf("show reveals the secret: %s", r.stdout)
	}
}

// TestChainDepthRefused: add sends VIGIL_CHAIN_DEPTH; past the limit the
// daemon refuses with chain_too_deep.
func TestChainDepthRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	env := map[string]string{"HOME": t.TempDir(), "USER": "tester", "VIGIL_ADDR": d.Addr(), "VIGIL_TOKEN": d.Token()}
	env["VIGIL_CHAIN_DEPTH"] = "3"
	if r := runCLI(t, env, "add", "timer", "1h", "-q"); r.code != 0 {
		t.Fatalf("depth 3: %+v, want registered", r)
	}
	env["VIGIL_CHAIN_DEPTH"] = "4"
	if r := runCLI(t, env, "add", "timer", "2h", "-q"); r.code == 0 || !strings.Contains(r.stderr, "chain 4 commands deep") {
		t.Fatalf("depth 4: %+v, want chain_too_deep", r)
	}
	env["VIGIL_CHAIN_DEPTH"] = "x"
	if r := runCLI(t, env, "add", "timer", "2h", "-q"); r.code != ExitUsage {
		t.Fatalf("depth x: %+v, want a usage error", r)
	}
}

// TestAddRunAndSchedule runs a run watch end to end through the daemon's
// supervisor (this test binary), and refuses a bad cron naming its field.
func TestAddRunAndSchedule(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := d.vigil(t, "add", "run", "--wait", "--shell", "echo from-run; exit 3")
	if r.code != 1 || !strings.Contains(r.stdout, "exited 3") {
		t.Fatalf("add run --wait: %+v, want failed (exit 1) saying exited 3", r)
	}
	r = d.vigil(t, "add", "schedule", "--cron", "0 24 * * *", "--", "date")
	if r.code == 0 || !strings.Contains(r.stderr, "field 2 (hour)") {
		t.Fatalf("add schedule with a bad cron: %+v", r)
	}
	r = d.vigil(t, "add", "schedule", "--every", "1h", "-q", "--", "date")
	if r.code != 0 {
		t.Fatalf("add schedule: %+v", r)
	}
}
