module github.com/npuchat/npuchat

go 1.26
