// Placeholder (skeleton): the page-load loader — launcher button and shortcut; imports the overlay on first open.
export {};
