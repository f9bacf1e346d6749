package githubapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxDescriptionChars is GitHub's limit on status descriptions.
const maxDescriptionChars = 140

// Status is a commit status, in GitHub's JSON shape.
type Status struct {
	ID          int64     `json:"id"`
	NodeID      string    `json:"node_id"`
	URL         string    `json:"url"`
	State       string    `json:"state"`
	Description string    `json:"description"`
	TargetURL   string    `json:"target_url"`
	Context     string    `json:"context"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Creator     User      `json:"creator"`
}

// Deployment is a deployment, in GitHub's JSON shape.
type Deployment struct {
	ID                    int64           `json:"id"`
	NodeID                string          `json:"node_id"`
	URL                   string          `json:"url"`
	SHA                   string          `json:"sha"`
	Ref                   string          `json:"ref"`
	Task                  string          `json:"task"`
	Payload               json.RawMessage `json:"payload"`
	OriginalEnvironment   string          `json:"original_environment"`
	Environment           string          `json:"environment"`
	Description           string          `json:"description"`
	Creator               User            `json:"creator"`
	CreatedAt             time.Time       `json:"created_at"`
	UpdatedAt             time.Time       `json:"updated_at"`
	StatusesURL           string          `json:"statuses_url"`
	RepositoryURL         string          `json:"repository_url"`
	TransientEnvironment  bool            `json:"transient_environment"`
	ProductionEnvironment bool            `json:"production_environment"`
}

// DeploymentStatus is a deployment status, in GitHub's JSON shape.
type DeploymentStatus struct {
	ID             int64     `json:"id"`
	NodeID         string    `json:"node_id"`
	URL            string    `json:"url"`
	State          string    `json:"state"`
	Creator        User      `json:"creator"`
	Description    string    `json:"description"`
	Environment    string    `json:"environment"`
	TargetURL      string    `json:"target_url"`
	LogURL         string    `json:"log_url"`
	EnvironmentURL string    `json:"environment_url"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	DeploymentURL  string    `json:"deployment_url"`
	RepositoryURL  string    `json:"repository_url"`
}

// Branch is the head or base of a pull request.
type Branch struct {
	Label string `json:"label"`
	Ref   string `json:"ref"`
	SHA   string `json:"sha"`
}

// PullRequest is the part of GitHub's pull request object that the
// commit-to-pulls endpoint returns and kplan reads.
type PullRequest struct {
	ID       int64      `json:"id"`
	Number   int        `json:"number"`
	State    string     `json:"state"`
	Title    string     `json:"title"`
	HTMLURL  string     `json:"html_url"`
	User     User       `json:"user"`
	Head     Branch     `json:"head"`
	Base     Branch     `json:"base"`
	Draft    bool       `json:"draft"`
	MergedAt *time.Time `json:"merged_at"`
	// The fields only GET …/pulls/{number} answers (with those above).
	Merged         bool   `json:"merged"`
	MergeCommitSHA string `json:"merge_commit_sha,omitempty"`
	MergedBy       *User  `json:"merged_by"`
	Commits        int    `json:"commits,omitempty"`
}

// Statuses returns copies of the statuses created for a commit, oldest
// first (GitHub's own list endpoint is newest first).
func (s *Server) Statuses(owner, repo, sha string) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyAll(s.statuses[shaKey{repoKey{owner, repo}, sha}])
}

// Deployments returns copies of a repository's deployments, oldest first.
func (s *Server) Deployments(owner, repo string) []Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyAll(s.deploys[repoKey{owner, repo}])
}

// DeploymentStatuses returns copies of a deployment's statuses, oldest first.
func (s *Server) DeploymentStatuses(deploymentID int64) []DeploymentStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyAll(s.depStatus[deploymentID])
}

// SeedPullForCommit makes the commits/{sha}/pulls endpoint list pr for sha.
// Zero fields get defaults: ID, State "open", HTMLURL, Head.SHA = sha.
func (s *Server) SeedPullForCommit(owner, repo, sha string, pr PullRequest) PullRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pr.ID == 0 {
		pr.ID = s.newID()
	}
	if pr.State == "" {
		pr.State = "open"
	}
	if pr.HTMLURL == "" {
		pr.HTMLURL = fmt.Sprintf("%s/%s/%s/pull/%d", s.srv.URL, owner, repo, pr.Number)
	}
	if pr.Head.SHA == "" {
		pr.Head.SHA = sha
	}
	k := shaKey{repoKey{owner, repo}, sha}
	s.prs[k] = append(s.prs[k], &pr)
	s.pulls[issueKey{repoKey{owner, repo}, pr.Number}] = &pr
	return pr
}

// MergePull records pull request number as merged by login into the
// commits shas (a merge commit or squash: one; a rebase: each commit it
// put on the branch, the last its merge_commit_sha), from base at head
// with commits commits: GET …/pulls/{number} answers it and
// …/commits/{sha}/pulls lists it for each sha, as GitHub does.
func (s *Server) MergePull(owner, repo string, number int, login, base, head string, commits int, shas ...string) PullRequest {
	at := now()
	by := userOf(Identity{Login: login, Type: userType(login)})
	pr := PullRequest{Number: number, State: "closed", Title: fmt.Sprintf("PR %d", number), Head: Branch{Ref: fmt.Sprintf("pr-%d", number), SHA: head},
		Base: Branch{Ref: "main", SHA: base}, MergedAt: &at, Merged: true, MergedBy: &by, Commits: commits, MergeCommitSHA: shas[len(shas)-1]}
	for _, sha := range shas {
		pr = s.SeedPullForCommit(owner, repo, sha, pr)
	}
	s.mu.Lock()
	s.users[login] = true
	s.mu.Unlock()
	return pr
}

// getPull is GET /repos/{owner}/{repo}/pulls/{number}.
func (s *Server) getPull(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	pr, ok := s.pulls[issueKey{repoOf(r), n}]
	var out PullRequest
	if ok {
		out = *pr
	}
	s.mu.Unlock()
	if err != nil || !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listPullsForCommit(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	all := copyAll(s.prs[shaKey{repoOf(r), r.PathValue("sha")}])
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, page(w, r, all))
}

type statusRequest struct {
	State       string `json:"state"`
	TargetURL   string `json:"target_url"`
	Description string `json:"description"`
	Context     string `json:"context"`
}

func (s *Server) createStatus(w http.ResponseWriter, r *http.Request) {
	author, ok := writable(w, r)
	if !ok {
		return
	}
	var req statusRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !slices.Contains([]string{"error", "failure", "pending", "success"}, req.State) {
		writeValidation(w, fieldError{Resource: "Status", Code: "custom", Field: "state", Message: "state is not included in the list"})
		return
	}
	if !validDescription(w, "Status", req.Description) {
		return
	}
	if req.Context == "" {
		req.Context = "default"
	}
	k := shaKey{repoOf(r), r.PathValue("sha")}
	s.mu.Lock()
	id := s.newID()
	t := now()
	st := &Status{
		ID:          id,
		NodeID:      fmt.Sprintf("SC_fake%d", id),
		URL:         fmt.Sprintf("%s/repos/%s/%s/statuses/%s", baseOf(r), k.owner, k.repo, k.sha),
		State:       req.State,
		Description: req.Description,
		TargetURL:   req.TargetURL,
		Context:     req.Context,
		CreatedAt:   t,
		UpdatedAt:   t,
		Creator:     userOf(author),
	}
	s.statuses[k] = append(s.statuses[k], st)
	out := *st
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

type deploymentRequest struct {
	Ref                   *string         `json:"ref"`
	Task                  string          `json:"task"`
	AutoMerge             *bool           `json:"auto_merge"`
	RequiredContexts      *[]string       `json:"required_contexts"`
	Payload               json.RawMessage `json:"payload"`
	Environment           string          `json:"environment"`
	Description           string          `json:"description"`
	TransientEnvironment  bool            `json:"transient_environment"`
	ProductionEnvironment *bool           `json:"production_environment"`
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// createDeployment records a deployment. It does not model auto_merge or
// required_contexts checks: it has no branches to merge or resolve.
func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request) {
	if !deploymentsAllowed(w, r) {
		return
	}
	author, ok := writable(w, r)
	if !ok {
		return
	}
	var req deploymentRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Ref == nil || *req.Ref == "" {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"ref\" wasn't supplied.")
		return
	}
	if req.Task == "" {
		req.Task = "deploy"
	}
	if req.Environment == "" {
		req.Environment = "production"
	}
	production := req.Environment == "production"
	if req.ProductionEnvironment != nil {
		production = *req.ProductionEnvironment
	}
	payload := req.Payload
	if len(payload) == 0 || string(payload) == "null" {
		payload = json.RawMessage("{}")
	}
	// Without branches to resolve, only a full SHA given as ref has a SHA.
	var sha string
	if fullSHA.MatchString(*req.Ref) {
		sha = *req.Ref
	}

	rk := repoOf(r)
	base := baseOf(r)
	s.mu.Lock()
	id := s.newID()
	t := now()
	url := fmt.Sprintf("%s/repos/%s/%s/deployments/%d", base, rk.owner, rk.repo, id)
	d := &Deployment{
		ID:                    id,
		NodeID:                fmt.Sprintf("DE_fake%d", id),
		URL:                   url,
		SHA:                   sha,
		Ref:                   *req.Ref,
		Task:                  req.Task,
		Payload:               payload,
		OriginalEnvironment:   req.Environment,
		Environment:           req.Environment,
		Description:           req.Description,
		Creator:               userOf(author),
		CreatedAt:             t,
		UpdatedAt:             t,
		StatusesURL:           url + "/statuses",
		RepositoryURL:         fmt.Sprintf("%s/repos/%s/%s", base, rk.owner, rk.repo),
		TransientEnvironment:  req.TransientEnvironment,
		ProductionEnvironment: production,
	}
	s.deploys[rk] = append(s.deploys[rk], d)
	out := *d
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

type deploymentStatusRequest struct {
	State          string `json:"state"`
	TargetURL      string `json:"target_url"`
	LogURL         string `json:"log_url"`
	Description    string `json:"description"`
	Environment    string `json:"environment"`
	EnvironmentURL string `json:"environment_url"`
	AutoInactive   *bool  `json:"auto_inactive"`
}

var deploymentStates = []string{"error", "failure", "inactive", "in_progress", "queued", "pending", "success"}

func (s *Server) createDeploymentStatus(w http.ResponseWriter, r *http.Request) {
	if !deploymentsAllowed(w, r) {
		return
	}
	did, ok := pathInt(w, r, "id")
	if !ok {
		return
	}
	author, ok := writable(w, r)
	if !ok {
		return
	}
	var req deploymentStatusRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !slices.Contains(deploymentStates, req.State) {
		writeValidation(w, fieldError{Resource: "DeploymentStatus", Code: "custom", Field: "state", Message: "state is not included in the list"})
		return
	}
	if !validDescription(w, "DeploymentStatus", req.Description) {
		return
	}
	// GitHub treats target_url as the legacy name of log_url.
	if req.LogURL == "" {
		req.LogURL = req.TargetURL
	}
	if req.TargetURL == "" {
		req.TargetURL = req.LogURL
	}

	st, ok := s.setDeploymentStatus(repoOf(r), did, author, req)
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusCreated, st)
}

// setDeploymentStatus adds a status to deployment id of repository rk.
func (s *Server) setDeploymentStatus(rk repoKey, id int64, author Identity, req deploymentStatusRequest) (DeploymentStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d *Deployment
	for _, cand := range s.deploys[rk] {
		if cand.ID == id {
			d = cand
		}
	}
	if d == nil {
		return DeploymentStatus{}, false
	}
	if req.Environment != "" {
		d.Environment = req.Environment
	}
	st := s.addDeploymentStatus(d, author, req)

	// auto_inactive (default true): a success marks earlier successful,
	// non-transient, non-production deployments to the same environment
	// inactive.
	if req.State == "success" && (req.AutoInactive == nil || *req.AutoInactive) {
		for _, prev := range s.deploys[rk] {
			if prev.ID == d.ID || prev.Environment != d.Environment || prev.TransientEnvironment || prev.ProductionEnvironment {
				continue
			}
			sts := s.depStatus[prev.ID]
			if prev.ID < d.ID && hasState(sts, "success") && sts[len(sts)-1].State != "inactive" {
				s.addDeploymentStatus(prev, author, deploymentStatusRequest{State: "inactive"})
			}
		}
	}
	return *st, true
}

// addDeploymentStatus stores a status for d; the caller holds s.mu.
func (s *Server) addDeploymentStatus(d *Deployment, author Identity, req deploymentStatusRequest) *DeploymentStatus {
	id := s.newID()
	t := now()
	st := &DeploymentStatus{
		ID:             id,
		NodeID:         fmt.Sprintf("DES_fake%d", id),
		URL:            fmt.Sprintf("%s/%d", d.StatusesURL, id),
		State:          req.State,
		Creator:        userOf(author),
		Description:    req.Description,
		Environment:    d.Environment,
		TargetURL:      req.TargetURL,
		LogURL:         req.LogURL,
		EnvironmentURL: req.EnvironmentURL,
		CreatedAt:      t,
		UpdatedAt:      t,
		DeploymentURL:  d.URL,
		RepositoryURL:  d.RepositoryURL,
	}
	s.depStatus[d.ID] = append(s.depStatus[d.ID], st)
	return st
}

func hasState(sts []*DeploymentStatus, state string) bool {
	for _, st := range sts {
		if st.State == state {
			return true
		}
	}
	return false
}

func validDescription(w http.ResponseWriter, resource, desc string) bool {
	if utf8.RuneCountInString(desc) > maxDescriptionChars {
		writeValidation(w, fieldError{
			Resource: resource, Code: "custom", Field: "description",
			Message: fmt.Sprintf("description is too long (maximum is %d characters)", maxDescriptionChars),
		})
		return false
	}
	return true
}

// newestFirst returns copies of items in reverse order, as GitHub's list
// endpoints order statuses and deployments.
func newestFirst[T any](items []*T) []T {
	out := copyAll(items)
	slices.Reverse(out)
	return out
}

// listStatuses lists a commit's statuses, newest first. The ref must be
// the full SHA: the server has no branches to resolve.
func (s *Server) listStatuses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	all := newestFirst(s.statuses[shaKey{repoOf(r), r.PathValue("ref")}])
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, page(w, r, all))
}

// listDeployments lists a repository's deployments, newest first,
// filtered by the sha, ref, task and environment query parameters as
// GitHub filters them.
func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) {
	if !deploymentsAllowed(w, r) {
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	all := newestFirst(s.deploys[repoOf(r)])
	s.mu.Unlock()
	out := []Deployment{}
	for _, d := range all {
		if (q.Has("sha") && d.SHA != q.Get("sha")) || (q.Has("ref") && d.Ref != q.Get("ref")) ||
			(q.Has("task") && d.Task != q.Get("task")) || (q.Has("environment") && d.Environment != q.Get("environment")) {
			continue
		}
		out = append(out, d)
	}
	writeJSON(w, http.StatusOK, page(w, r, out))
}

// listDeploymentStatuses lists a deployment's statuses, newest first.
func (s *Server) listDeploymentStatuses(w http.ResponseWriter, r *http.Request) {
	if !deploymentsAllowed(w, r) {
		return
	}
	did, ok := pathInt(w, r, "id")
	if !ok {
		return
	}
	rk := repoOf(r)
	s.mu.Lock()
	found := slices.ContainsFunc(s.deploys[rk], func(d *Deployment) bool { return d.ID == did })
	all := newestFirst(s.depStatus[did])
	s.mu.Unlock()
	if !found {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, page(w, r, all))
}
