package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// DefaultDeployNowLabel is the label that deploys a merged pull request
// at once, outside its targets' deploy windows or freeze, when a user
// with write access adds it (deployNowLabel).
const DefaultDeployNowLabel = "kplan/deploy-now"

// Window is a time a target may deploy in: on Days (none: every day),
// from Start to End (minutes after midnight, End exclusive, up to 24:00),
// in Location, as Argo CD's sync windows and flux-operator's deployment
// windows have it.
type Window struct {
	Days       []time.Weekday
	Start, End int
	Location   *time.Location
}

// String is the window as the file writes it, for reports.
func (w Window) String() string {
	days := "every day"
	if len(w.Days) > 0 {
		var names []string
		for _, d := range w.Days {
			names = append(names, d.String()[:3])
		}
		days = strings.Join(names, ",")
	}
	return fmt.Sprintf("%s %s-%s %s", days, clock(w.Start), clock(w.End), w.Location)
}

func clock(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

func (w Window) onDay(d time.Weekday) bool { return len(w.Days) == 0 || slices.Contains(w.Days, d) }

// Contains says whether now is in the window.
func (w Window) Contains(now time.Time) bool {
	l := now.In(w.Location)
	m := l.Hour()*60 + l.Minute()
	return w.onDay(l.Weekday()) && w.Start <= m && m < w.End
}

// next is the window's first opening after now (zero: none within eight
// days, which a valid window always has).
func (w Window) next(now time.Time) time.Time {
	l := now.In(w.Location)
	for d := 0; d <= 8; d++ {
		s := time.Date(l.Year(), l.Month(), l.Day()+d, w.Start/60, w.Start%60, 0, 0, w.Location)
		if s.After(now) && w.onDay(s.Weekday()) {
			return s
		}
	}
	return time.Time{}
}

// DeployAllowed says whether the target may deploy at now: not frozen,
// and in one of its windows (a target without windows always may). When
// it may not, opens is when its next window opens (zero when frozen:
// only a change of the configuration, or the deploy-now label, lifts a
// freeze).
func (t Target) DeployAllowed(now time.Time) (ok bool, opens time.Time) {
	if t.Freeze {
		return false, time.Time{}
	}
	if len(t.Windows) == 0 {
		return true, time.Time{}
	}
	for _, w := range t.Windows {
		if w.Contains(now) {
			return true, time.Time{}
		}
		if n := w.next(now); !n.IsZero() && (opens.IsZero() || n.Before(opens)) {
			opens = n
		}
	}
	return false, opens
}

var weekdays = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

func weekday(s string) (time.Weekday, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > 3 {
		if full := strings.ToLower(weekdays[s[:3]].String()); full != s {
			return 0, false
		}
		s = s[:3]
	}
	d, ok := weekdays[s]
	return d, ok
}

// windows reads a target's deployWindows.
func (p *parser) windows(v *yaml.Node, field string) []Window {
	var out []Window
	for i, item := range p.list(v, field, "window") {
		at := fmt.Sprintf("%s[%d]", field, i)
		w := Window{Location: time.UTC}
		hours := false
		seen := p.fields(item, at, map[string]func(*yaml.Node, string){
			"days": func(v *yaml.Node, field string) {
				for j, d := range p.list(v, field, "day") {
					s, ok := p.nonEmpty(d, fmt.Sprintf("%s[%d]", field, j))
					if !ok {
						continue
					}
					days, ok := dayRange(s)
					if !ok {
						p.errorf(d, fmt.Sprintf("%s[%d]", field, j), "%q is not a day (Mon, Tue, … Sun) or a range of days (Mon-Fri)", s)
						continue
					}
					for _, day := range days {
						if !slices.Contains(w.Days, day) {
							w.Days = append(w.Days, day)
						}
					}
				}
			},
			"hours": func(v *yaml.Node, field string) {
				s, ok := p.nonEmpty(v, field)
				if !ok {
					return
				}
				start, end, msg := hourRange(s)
				if msg != "" {
					p.errorf(v, field, "%q %s", s, msg)
					return
				}
				w.Start, w.End, hours = start, end, true
			},
			"timeZone": func(v *yaml.Node, field string) {
				s, ok := p.nonEmpty(v, field)
				if !ok {
					return
				}
				loc, err := time.LoadLocation(s)
				if err != nil {
					p.errorf(v, field, "%q is not a time zone of the IANA database (e.g. Europe/Berlin, America/New_York, UTC)", s)
					return
				}
				w.Location = loc
			},
		})
		if seen == nil {
			continue
		}
		p.required(item, at, seen, "hours")
		if hours {
			out = append(out, w)
		}
	}
	return out
}

// dayRange reads a day (Mon) or a range of days (Mon-Fri, Fri-Mon).
func dayRange(s string) ([]time.Weekday, bool) {
	from, to, isRange := strings.Cut(s, "-")
	a, ok := weekday(from)
	if !ok {
		return nil, false
	}
	if !isRange {
		return []time.Weekday{a}, true
	}
	b, ok := weekday(to)
	if !ok {
		return nil, false
	}
	var out []time.Weekday
	for d := a; ; d = (d + 1) % 7 {
		out = append(out, d)
		if d == b {
			return out, true
		}
	}
}

// hourRange reads "HH:MM-HH:MM" into minutes after midnight.
func hourRange(s string) (start, end int, msg string) {
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, "is not a range of hours such as 09:00-17:00"
	}
	start, ok1 := minutes(from)
	end, ok2 := minutes(to)
	switch {
	case !ok1 || !ok2:
		return 0, 0, "is not a range of hours such as 09:00-17:00 (HH:MM, 00:00 to 24:00)"
	case end <= start:
		return 0, 0, "ends before it starts: a window through midnight is two windows (22:00-24:00 and 00:00-06:00 of the next days)"
	}
	return start, end, ""
}

func minutes(s string) (int, bool) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || len(h) == 0 || len(h) > 2 || len(m) != 2 {
		return 0, false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh > 24 || hh == 24 && mm != 0 {
		return 0, false
	}
	return hh*60 + mm, true
}

// dependencies checks every target's dependsOn: each names a target of
// the same repository and branch, and no target depends on itself
// through others. Names are resolved to the targets' own spelling.
func (p *parser) dependencies(cfg *Config) {
	for ri := range cfg.Repositories {
		r := &cfg.Repositories[ri]
		for bi := range r.Branches {
			b := &r.Branches[bi]
			names := map[string]string{}
			for _, t := range b.Targets {
				names[strings.ToLower(t.Name)] = t.Name
			}
			for ti := range b.Targets {
				t := &b.Targets[ti]
				var deps []string
				for _, d := range t.DependsOn {
					name, ok := names[strings.ToLower(d)]
					if ok {
						deps = append(deps, name)
						continue
					}
					where := "no target of the file has that name"
					for _, ref := range cfg.AllTargets() {
						if strings.EqualFold(ref.Target.Name, d) {
							where = fmt.Sprintf("%s is a target of %s@%s", ref.Target.Name, ref.Repo, ref.Branch)
						}
					}
					p.errs = append(p.errs, fmt.Errorf("%s:%d: target %q: dependsOn %q: %s; a target depends only on targets of its own repository and branch (%s@%s), which deploy the same commit",
						p.file, p.targets[strings.ToLower(t.Name)], t.Name, d, where, r.Name, b.Name))
				}
				t.DependsOn = deps
			}
			if cycle := dependencyCycle(b.Targets); cycle != nil {
				p.errs = append(p.errs, fmt.Errorf("%s:%d: dependsOn makes a cycle: %s; no target of it could ever deploy, as each waits for the one before it: remove one of these dependencies",
					p.file, p.targets[strings.ToLower(cycle[0])], strings.Join(cycle, " → ")))
			}
		}
	}
}

// dependencyCycle returns a cycle of dependsOn among targets, its first
// target repeated at its end, or nil.
func dependencyCycle(targets []Target) []string {
	deps := map[string][]string{}
	for _, t := range targets {
		deps[t.Name] = t.DependsOn
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		switch state[n] {
		case open:
			i := slices.Index(path, n)
			return append(slices.Clone(path[i:]), n)
		case done:
			return nil
		}
		state[n] = open
		path = append(path, n)
		for _, d := range deps[n] {
			if c := visit(d); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, t := range targets {
		if c := visit(t.Name); c != nil {
			return c
		}
	}
	return nil
}

// RolloutOrder is the order a merge applies targets in, as stages: each
// stage's targets depend only on targets of earlier stages, and run at
// once. Dependencies on targets not listed are ignored (a target whose
// dependency is not in targets runs in the first stage). targets must
// have no cycle (the configuration refuses one).
func RolloutOrder(targets []Target) [][]string {
	stage := map[string]int{}
	byName := map[string]Target{}
	for _, t := range targets {
		byName[t.Name] = t
	}
	var depth func(n string, seen int) int
	depth = func(n string, seen int) int {
		if s, ok := stage[n]; ok {
			return s
		}
		d := 0
		if seen <= len(targets) { // a cycle would not end
			for _, dep := range byName[n].DependsOn {
				if _, ok := byName[dep]; ok {
					d = max(d, depth(dep, seen+1)+1)
				}
			}
		}
		stage[n] = d
		return d
	}
	var out [][]string
	for _, t := range targets {
		d := depth(t.Name, 0)
		for len(out) <= d {
			out = append(out, nil)
		}
		out[d] = append(out[d], t.Name)
	}
	for _, s := range out {
		slices.Sort(s)
	}
	return out
}

// DescribeOrder writes a rollout order: "staging → prod-eu, prod-us".
func DescribeOrder(stages [][]string) string {
	parts := make([]string, len(stages))
	for i, s := range stages {
		parts[i] = strings.Join(s, ", ")
	}
	return strings.Join(parts, " → ")
}

// RolloutNotes say, by overlay of repo, how the webhook rolls a change
// of it out where that is not "at once": the rollout order of the
// branch's targets (dependsOn), the deploy windows, a freeze. A plan of
// the repository shows them on the overlays it changes.
func (c *Config) RolloutNotes(repo string) map[string][]string {
	r := c.Repository(repo)
	if r == nil {
		return nil
	}
	out := map[string][]string{}
	for _, b := range r.Branches {
		order := RolloutOrder(b.Targets)
		for _, t := range b.Targets {
			var n []string
			if len(t.DependsOn) > 0 {
				n = append(n, fmt.Sprintf("target %s deploys a merge into %s after %s has (dependsOn; order %s), and not if it fails",
					t.Name, b.Name, strings.Join(t.DependsOn, " and "), DescribeOrder(order)))
			}
			if t.Freeze {
				n = append(n, fmt.Sprintf("target %s is frozen: a merge into %s waits until the freeze is lifted (or a writer adds the label %s)", t.Name, b.Name, c.deployNowLabel()))
			} else if len(t.Windows) > 0 {
				var ws []string
				for _, w := range t.Windows {
					ws = append(ws, w.String())
				}
				n = append(n, fmt.Sprintf("target %s deploys a merge into %s only in its deploy windows (%s); outside them it waits (or a writer adds the label %s)",
					t.Name, b.Name, strings.Join(ws, "; "), c.deployNowLabel()))
			}
			out[t.Overlay] = append(out[t.Overlay], n...)
		}
	}
	return out
}

func (c *Config) deployNowLabel() string {
	if c.DeployNowLabel == "" {
		return DefaultDeployNowLabel
	}
	return c.DeployNowLabel
}
