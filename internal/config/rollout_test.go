package config

import (
	"strings"
	"testing"
	"time"
)

func branchOf(targets string) string {
	return "repositories:\n  - name: o/r\n    branches:\n      - name: main\n        targets:\n" + targets +
		"      - name: staging\n        targets:\n          - {name: other, overlay: o}\n"
}

func TestDependsOn(t *testing.T) {
	for _, tc := range []struct {
		name, targets string
		want          []string // substrings of the error; none: valid
		order         string
	}{
		{"chain", "          - {name: staging, overlay: s}\n          - {name: prod-eu, overlay: p, dependsOn: [staging]}\n          - {name: prod-us, overlay: u, dependsOn: [Staging]}\n",
			nil, "staging → prod-eu, prod-us"},
		{"diamond", "          - {name: a, overlay: a}\n          - {name: b, overlay: b, dependsOn: [a]}\n          - {name: c, overlay: c, dependsOn: [a]}\n          - {name: d, overlay: d, dependsOn: [b, c]}\n",
			nil, "a → b, c → d"},
		{"unknown", "          - {name: prod, overlay: p, dependsOn: [stagin]}\n",
			[]string{`w.yaml:6: target "prod": dependsOn "stagin": no target of the file has that name; a target depends only on targets of its own repository and branch (o/r@main)`}, ""},
		{"other branch", "          - {name: prod, overlay: p, dependsOn: [other]}\n",
			[]string{`target "prod": dependsOn "other": other is a target of o/r@staging`}, ""},
		{"self", "          - {name: prod, overlay: p, dependsOn: [prod]}\n",
			[]string{`w.yaml:6: dependsOn makes a cycle: prod → prod`}, ""},
		{"cycle", "          - {name: a, overlay: a, dependsOn: [c]}\n          - {name: b, overlay: b, dependsOn: [a]}\n          - {name: c, overlay: c, dependsOn: [b]}\n",
			[]string{`w.yaml:6: dependsOn makes a cycle: a → c → b → a; no target of it could ever deploy`}, ""},
		{"empty", "          - {name: prod, overlay: p, dependsOn: []}\n", []string{"dependsOn: at least one target is required"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("w.yaml", []byte(branchOf(tc.targets)))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got := DescribeOrder(RolloutOrder(cfg.Targets("o/r", "main"))); got != tc.order {
					t.Errorf("order %q, want %q", got, tc.order)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain\n%s", err, w)
				}
			}
		})
	}
}

func TestDeployWindows(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, ny)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	cfg, err := Parse("w.yaml", []byte(branchOf(`          - name: prod
            overlay: p
            deployWindows:
              - {days: [Mon-Thu], hours: "09:00-17:00", timeZone: America/New_York}
              - {days: [fri], hours: "09:00-12:00", timeZone: America/New_York}
`)))
	if err != nil {
		t.Fatal(err)
	}
	prod := cfg.Targets("o/r", "main")[0]
	if got, want := prod.Windows[0].String(), "Mon,Tue,Wed,Thu 09:00-17:00 America/New_York"; got != want {
		t.Errorf("window %q, want %q", got, want)
	}
	for _, tc := range []struct {
		now, opens string // opens "": allowed
	}{
		{"2026-11-24 10:00", ""},                 // a Tuesday
		{"2026-11-24 17:00", "2026-11-25 09:00"}, // the end is excluded
		{"2026-11-27 11:59", ""},                 // Friday morning
		{"2026-11-27 12:00", "2026-11-30 09:00"}, // Friday afternoon: Monday
		{"2026-11-28 10:00", "2026-11-30 09:00"}, // Saturday
		{"2026-11-23 08:59", "2026-11-23 09:00"},
		{"2026-03-06 13:00", "2026-03-09 09:00"}, // over the DST change (8 March): 09:00 local
	} {
		ok, opens := prod.DeployAllowed(at(tc.now))
		switch {
		case tc.opens == "" && !ok:
			t.Errorf("%s: not allowed, opens %v", tc.now, opens)
		case tc.opens != "" && (ok || !opens.Equal(at(tc.opens))):
			t.Errorf("%s: allowed %v, opens %v, want %s", tc.now, ok, opens.In(ny), tc.opens)
		}
	}
	prod.Freeze = true
	if ok, opens := prod.DeployAllowed(at("2026-11-24 10:00")); ok || !opens.IsZero() {
		t.Errorf("frozen: allowed %v, opens %v", ok, opens)
	}

	for _, tc := range []struct{ window, want string }{
		{`{hours: "17:00-09:00"}`, `hours: "17:00-09:00" ends before it starts: a window through midnight is two windows`},
		{`{hours: "9-17"}`, `hours: "9-17" is not a range of hours such as 09:00-17:00 (HH:MM, 00:00 to 24:00)`},
		{`{hours: "09:00-24:01"}`, `is not a range of hours`},
		{`{hours: "09:00-17:00", timeZone: Mars/Olympus}`, `timeZone: "Mars/Olympus" is not a time zone of the IANA database`},
		{`{hours: "09:00-17:00", days: [Funday]}`, `days[0]: "Funday" is not a day (Mon, Tue, … Sun) or a range of days (Mon-Fri)`},
		{`{days: [Mon]}`, `deployWindows[0].hours: required`},
	} {
		_, err := Parse("w.yaml", []byte(branchOf("          - name: prod\n            overlay: p\n            deployWindows: ["+tc.window+"]\n")))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.window, err, tc.want)
		}
	}
	for _, tc := range []struct{ days, want string }{
		{"[Fri-Mon]", "Fri,Sat,Sun,Mon"}, {"[Sunday, mon]", "Sun,Mon"}, {"[Mon-Fri, Wed]", "Mon,Tue,Wed,Thu,Fri"},
	} {
		cfg, err := Parse("w.yaml", []byte(branchOf("          - name: prod\n            overlay: p\n            deployWindows: [{days: "+tc.days+`, hours: "00:00-24:00"}]`+"\n")))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Targets("o/r", "main")[0].Windows[0].String(); got != tc.want+" 00:00-24:00 UTC" {
			t.Errorf("days %s: %q", tc.days, got)
		}
	}
}
