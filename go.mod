module github.com/npuchat/npuchat

go 1.26

require golang.org/x/sys v0.50.0 // indirect
