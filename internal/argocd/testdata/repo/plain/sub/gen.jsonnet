local x = 1; {}
