"""The Likert task on Mephisto: the crowd runner and its Mephisto compatibility module. Both run in the crowd
virtualenv (Python 3.10) as scripts; nothing in the main virtualenv imports them."""
