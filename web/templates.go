package web

import "html/template"

// pageNames are the templates of the pages; each is parsed with the
// layout.
var pageNames = []string{"error", "signin", "facts", "fact", "forget", "forgot", "receipts",
	"forgets", "query", "sessions", "session", "decisions", "passport", "handoffs"}

// parsePages parses every page over the layout.
func parsePages() map[string]*template.Template {
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		pages[name] = template.Must(template.New(name).ParseFS(assets, "templates/layout.html", "templates/"+name+".html"))
	}
	return pages
}
