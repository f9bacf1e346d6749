package gitlabapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

func contextWith(r *http.Request, u User) context.Context {
	return context.WithValue(r.Context(), ctxKey{}, u)
}

func userOf(r *http.Request) User { u, _ := r.Context().Value(ctxKey{}).(User); return u }

func userJSON(u User) map[string]any {
	return map[string]any{"id": u.ID, "username": u.Username, "name": u.Username, "state": "active",
		"bot": strings.HasPrefix(u.Username, "project_") || strings.HasPrefix(u.Username, "group_")}
}

func (s *Server) userNamed(name string) User {
	if u, ok := s.users[strings.ToLower(name)]; ok {
		return u
	}
	return User{Username: name}
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, userJSON(userOf(r)))
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	u, ok := s.users[strings.ToLower(r.URL.Query().Get("username"))]
	s.mu.Unlock()
	out := []any{}
	if ok {
		out = append(out, userJSON(u))
	}
	writeJSON(w, http.StatusOK, out)
}

func mrKey(r *http.Request) string { return r.PathValue("project") + "\x00" + r.PathValue("iid") }

func (s *Server) noteJSON(r *http.Request, n *Note) map[string]any {
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	return map[string]any{"id": n.ID, "type": nil, "body": n.Body, "attachment": nil, "author": userJSON(s.userNamed(n.Author)),
		"created_at": timestamp(), "updated_at": timestamp(), "system": n.System, "noteable_type": "MergeRequest",
		"noteable_iid": iid, "resolvable": false, "confidential": false, "internal": false}
}

// listNotes pages as GitLab does: page and per_page (at most 100), the
// next page in X-Next-Page.
func (s *Server) listNotes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, _ := strconv.Atoi(q.Get("page"))
	per, _ := strconv.Atoi(q.Get("per_page"))
	page, per = max(page, 1), min(max(per, 1), 100)
	if q.Get("per_page") == "" {
		per = 20
	}
	s.mu.Lock()
	all := s.notes[mrKey(r)]
	if q.Get("sort") != "asc" {
		all = slices.Clone(all)
		slices.Reverse(all) // GitLab's default: newest first
	}
	out := []any{}
	for i := (page - 1) * per; i < len(all) && i < page*per; i++ {
		out = append(out, s.noteJSON(r, all[i]))
	}
	s.mu.Unlock()
	w.Header().Set("X-Page", strconv.Itoa(page))
	w.Header().Set("X-Per-Page", strconv.Itoa(per))
	w.Header().Set("X-Total", strconv.Itoa(len(all)))
	if page*per < len(all) {
		w.Header().Set("X-Next-Page", strconv.Itoa(page+1))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createNote(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Body string `json:"body"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Body == "" {
		writeError(w, http.StatusBadRequest, "400 Bad request - Note {:note=>[\"can't be blank\"]}")
		return
	}
	s.mu.Lock()
	n := &Note{ID: s.id(), Body: req.Body, Author: userOf(r).Username}
	s.notes[mrKey(r)] = append(s.notes[mrKey(r)], n)
	out := s.noteJSON(r, n)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) updateNote(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Body string `json:"body"`
	}
	if !decode(w, r, &req) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.notes[mrKey(r)] {
		if n.ID == id {
			if !strings.EqualFold(n.Author, userOf(r).Username) {
				writeError(w, http.StatusForbidden, "403 Forbidden")
				return
			}
			n.Body = req.Body
			writeJSON(w, http.StatusOK, s.noteJSON(r, n))
			return
		}
	}
	writeError(w, http.StatusNotFound, "404 Note Not Found")
}

var statusStates = []string{"pending", "running", "success", "failed", "canceled", "skipped"}

func (s *Server) setStatus(w http.ResponseWriter, r *http.Request) {
	var req struct {
		State       string `json:"state"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Ref         string `json:"ref"`
	}
	if !decode(w, r, &req) {
		return
	}
	if !slices.Contains(statusStates, req.State) {
		writeError(w, http.StatusBadRequest, "400 Bad request - state does not have a valid value")
		return
	}
	if len(req.Description) > 255 {
		writeError(w, http.StatusBadRequest, "400 Bad request - description is too long (maximum is 255 characters)")
		return
	}
	sha := r.PathValue("sha")
	st := &Status{Name: req.Name, State: req.State, Description: req.Description, Ref: req.Ref}
	s.mu.Lock()
	k := r.PathValue("project") + "\x00" + sha
	s.statuses[k] = append(s.statuses[k], st)
	id := s.id()
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, statusJSON(id, sha, st, userOf(r)))
}

func statusJSON(id int64, sha string, st *Status, u User) map[string]any {
	return map[string]any{"id": id, "sha": sha, "ref": st.Ref, "status": st.State, "name": st.Name,
		"description": st.Description, "created_at": timestamp(), "author": userJSON(u), "allow_failure": false}
}

func (s *Server) listStatuses(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("sha")
	s.mu.Lock()
	out := []any{}
	for i, st := range s.statuses[r.PathValue("project")+"\x00"+sha] {
		if name := r.URL.Query().Get("name"); name != "" && name != st.Name {
			continue
		}
		out = append(out, statusJSON(int64(i+1), sha, st, User{}))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) mrJSON(project string, mr *MergeRequest) map[string]any {
	out := map[string]any{"id": mr.IID + 100000, "iid": mr.IID, "state": mr.State, "sha": mr.SHA,
		"merge_commit_sha": nilIfEmpty(mr.MergeCommitSHA), "squash_commit_sha": nilIfEmpty(mr.SquashCommitSHA),
		"source_branch": mr.SourceBranch, "target_branch": mr.TargetBranch,
		"source_project_id": mr.SourceProjectID, "target_project_id": mr.TargetProjID, "title": "!" + strconv.FormatInt(mr.IID, 10),
		"web_url":   "https://gitlab.example/" + project + "/-/merge_requests/" + strconv.FormatInt(mr.IID, 10),
		"diff_refs": map[string]any{"base_sha": nilIfEmpty(mr.BaseSHA), "head_sha": nilIfEmpty(mr.SHA), "start_sha": nilIfEmpty(mr.BaseSHA)},
		"author":    nil, "merge_user": nil, "merged_by": nil, "merged_at": nil}
	if mr.Author != "" {
		out["author"] = userJSON(s.userNamed(mr.Author))
	}
	if mr.MergedBy != "" {
		out["merge_user"], out["merged_by"] = userJSON(s.userNamed(mr.MergedBy)), userJSON(s.userNamed(mr.MergedBy))
	}
	if at := mr.MergedAt; !at.IsZero() || mr.State == "merged" {
		if at.IsZero() {
			at = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		out["merged_at"] = at.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// mergeRequestOr404 is the merge request a route names, or nil after
// GitLab's 404 answer; s.mu is held.
func (s *Server) mergeRequestOr404(w http.ResponseWriter, r *http.Request) *MergeRequest {
	mr := s.mrs[mrKey(r)]
	if mr == nil {
		writeError(w, http.StatusNotFound, "404 Not found")
	}
	return mr
}

// getMergeRequestCommits is GET /projects/:id/merge_requests/:iid/commits.
func (s *Server) getMergeRequestCommits(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mergeRequestOr404(w, r)
	if mr == nil {
		return
	}
	out := []any{}
	for i, name := range mr.Committers {
		id := fmt.Sprintf("%040x", i+1)
		out = append(out, map[string]any{"id": id, "short_id": id[:8], "title": "commit", "author_name": name, "author_email": name + "@example.com",
			"committer_name": name, "committer_email": name + "@example.com"})
	}
	writeJSON(w, http.StatusOK, out)
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) getMergeRequest(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mergeRequestOr404(w, r)
	if mr == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.mrJSON(r.PathValue("project"), mr))
}

func (s *Server) mergeRequestsOfCommit(w http.ResponseWriter, r *http.Request) {
	project, sha := r.PathValue("project"), r.PathValue("sha")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []any{}
	for k, mr := range s.mrs {
		if strings.HasPrefix(k, project+"\x00") && (mr.SHA == sha || mr.MergeCommitSHA == sha) {
			out = append(out, s.mrJSON(project, mr))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// getApprovals is GET /projects/:id/merge_requests/:iid/approvals.
func (s *Server) getApprovals(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mr := s.mergeRequestOr404(w, r)
	if mr == nil {
		return
	}
	by := []any{}
	for _, name := range mr.approvedBy {
		by = append(by, map[string]any{"user": userJSON(s.userNamed(name))})
	}
	left := max(mr.ApprovalsRequired-int64(len(mr.approvedBy)), 0)
	writeJSON(w, http.StatusOK, map[string]any{"id": mr.IID + 100000, "iid": mr.IID, "state": mr.State,
		"approved": left == 0, "approvals_required": mr.ApprovalsRequired, "approvals_left": left, "approved_by": by,
		"user_has_approved": false, "user_can_approve": false, "has_approval_rules": mr.ApprovalsRequired > 0})
}

func (s *Server) getMember(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	level, ok := s.members[r.PathValue("project")+"\x00"+r.PathValue("user")]
	if !ok {
		writeError(w, http.StatusNotFound, "404 Not found")
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("user"), 10, 64)
	name := ""
	for _, u := range s.users {
		if u.ID == id {
			name = u.Username
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "username": name, "state": "active", "access_level": level})
}

var deploymentStates = []string{"created", "running", "success", "failed", "canceled", "blocked"}

func (s *Server) deploymentJSON(d *Deployment) map[string]any {
	return map[string]any{"id": d.ID, "iid": d.ID - 1000, "ref": d.Ref, "sha": d.SHA, "status": d.Status,
		"created_at": timestamp(), "updated_at": timestamp(), "user": userJSON(s.userNamed(d.User)),
		"environment": map[string]any{"id": 1, "name": d.Environment}, "deployable": nil}
}

// createDeployment is POST /projects/:id/deployments. A protected
// environment takes deployments only from its allowed deployers: others
// get 403, as GitLab answers them.
func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Environment string `json:"environment"`
		SHA         string `json:"sha"`
		Ref         string `json:"ref"`
		Tag         bool   `json:"tag"`
		Status      string `json:"status"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Environment == "" || req.SHA == "" || req.Ref == "" || !slices.Contains(deploymentStates, req.Status) {
		writeError(w, http.StatusBadRequest, "400 Bad request - environment, sha, ref and a valid status are required")
		return
	}
	project := r.PathValue("project")
	u := userOf(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if allowed, ok := s.protected[project+"\x00"+req.Environment]; ok && !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, u.Username) }) {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	d := &Deployment{ID: s.id(), Environment: req.Environment, SHA: req.SHA, Ref: req.Ref, Status: req.Status, History: []string{req.Status}, User: u.Username}
	s.deployments[project] = append(s.deployments[project], d)
	writeJSON(w, http.StatusCreated, s.deploymentJSON(d))
}

func (s *Server) updateDeployment(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Status string `json:"status"`
	}
	if !decode(w, r, &req) {
		return
	}
	if !slices.Contains(deploymentStates, req.Status) {
		writeError(w, http.StatusBadRequest, "400 Bad request - status does not have a valid value")
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.deployments[r.PathValue("project")] {
		if d.ID == id {
			d.Status = req.Status
			d.History = append(d.History, req.Status)
			writeJSON(w, http.StatusOK, s.deploymentJSON(d))
			return
		}
	}
	writeError(w, http.StatusNotFound, "404 Not found")
}

// listDeployments filters by environment and status, newest first when
// asked (sort=desc), as kplan asks.
func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) {
	if userOf(r).Guest {
		writeError(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ds []*Deployment
	for _, d := range s.deployments[r.PathValue("project")] {
		if (q.Get("environment") == "" || q.Get("environment") == d.Environment) && (q.Get("status") == "" || q.Get("status") == d.Status) {
			ds = append(ds, d)
		}
	}
	if q.Get("sort") == "desc" {
		slices.Reverse(ds)
	}
	out := []any{}
	for _, d := range ds {
		out = append(out, s.deploymentJSON(d))
	}
	writeJSON(w, http.StatusOK, out)
}

// getProjectApprovals is GET /projects/:id/approvals, the project's
// approval settings.
func (s *Server) getProjectApprovals(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	keeps := s.keepsApprovals[r.PathValue("project")]
	set := s.approvalSet[r.PathValue("project")]
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"approvals_before_merge": 0, "reset_approvals_on_push": !keeps,
		"disable_overriding_approvers_per_merge_request": false, "merge_requests_author_approval": set.AuthorApproval,
		"merge_requests_disable_committers_approval": set.NoCommitterApproval, "require_password_to_approve": false})
}
